/**
 * `vagen eval CONFIG.yaml [key.path=value ...]`: evaluate a model on environments.
 * Thin: plan the run from the config, build the client, run the plan with a view that
 * draws its events, print the summary table.
 */
import { existsSync, statSync } from "node:fs";
import type { Command } from "commander";
import { createEnv } from "../../../envs/registry.ts";
import { createClient } from "../../clients/config.ts";
import { redactText } from "../../config/index.ts";
import { VagenError } from "../../core/errors.ts";
import { loadEvalPlan } from "../../evaluation/config.ts";
import type { EvalEventListener } from "../../evaluation/events.ts";
import { summaryPath } from "../../evaluation/layout.ts";
import { runEvaluation } from "../../evaluation/runner.ts";
import { type EvalSummary, summaryWarnings } from "../../evaluation/summary.ts";
import { formatEvalTable } from "../render/eval-table.ts";
import { startEvalDashboard } from "../../tui/eval-dashboard.ts";
import { type ImageMode, parseImageMode, resolveImageMode } from "../../tui/image/index.ts";
import { evalBarRenderer, evalLogRenderer } from "../render/eval-lines.ts";
import { isTrainRunDir, prepareRunEvaluation } from "./eval-run.ts";

/** Exit status after Ctrl-C, as shells report a SIGINT death (128 + 2). */
const INTERRUPTED_EXIT = 130;

export function register(program: Command): void {
  program
    .command("eval")
    .description("evaluate a model (an OpenAI-compatible endpoint, or a model directory in-process) on environments; per-episode dumps + summary")
    .argument("<config>", "eval config YAML (see examples/eval/), or a vagen train run folder: its best actor (else newest checkpoint) on its validation envs")
    .argument("[overrides...]", "key.path=value overrides, e.g. envs.sokoban.episodes=4 model.base_url=http://host:8000/v1")
    .option("--no-progress", "plain log lines instead of a progress bar, even on a terminal")
    .option("--no-tui", "a progress bar or log lines instead of the dashboard, even on a terminal")
    .option("--image <mode>", "how the dashboard draws observation images: auto, kitty, iterm2, sixel, blocks, none", parseImageModeFlag, "auto")
    .action(async (file: string, overrides: string[], opts: { progress: boolean; tui: boolean; image: ImageMode }) => {
      await evalCommand(file, overrides, opts);
    });
}

function parseImageModeFlag(value: string): ImageMode {
  try {
    return parseImageMode(value);
  } catch (err) {
    throw new VagenError((err as Error).message);
  }
}

async function evalCommand(file: string, overrides: string[], opts: { progress: boolean; tui: boolean; image: ImageMode }): Promise<void> {
  if (isTrainRunDir(file)) {
    const prepared = prepareRunEvaluation(file);
    process.stderr.write(`eval: ${prepared.weights} on the run's validation envs; config ${prepared.config}\n`);
    file = prepared.config;
  } else if (existsSync(file) && statSync(file).isDirectory()) {
    throw new VagenError(`${file}: a folder, expected an eval config YAML or a folder vagen train wrote (with its config.yaml)`);
  }
  const plan = await loadEvalPlan(file, overrides);
  // A terminal gets the dashboard; pipes, CI and --no-tui keep the bar or the log lines.
  const dashboard =
    opts.tui && process.stdout.isTTY && process.stdin.isTTY
      ? startEvalDashboard({
          episodes: plan.episodes.map((e) => ({ tag: e.env.tag, dir: e.dir })),
          protocol: resolveImageMode(opts.image),
          onInterrupt: () => onSigint(),
          // q leaves the dashboard; the run goes on with log lines.
          onQuit: () => (view = evalLogRenderer()),
        })
      : undefined;
  let view: EvalEventListener = dashboard?.onEvent ?? (opts.progress && process.stderr.isTTY ? evalBarRenderer() : evalLogRenderer());
  const client = createClient(plan.config.model, {
    onRetry: (e) => view({ type: "warning", code: "retry", message: `retry ${e.retry} in ${(e.delayMs / 1000).toFixed(2)} s after: ${e.reason}` }),
  });

  // First Ctrl-C: stop starting episodes, cancel the ones in flight, keep what finished.
  // Second Ctrl-C: leave at once.
  const controller = new AbortController();
  const onSigint = () => {
    if (controller.signal.aborted) process.exit(INTERRUPTED_EXIT);
    view({ type: "warning", code: "interrupted", message: "interrupted: stopping (finished episodes are kept; Ctrl-C again to quit now)" });
    controller.abort();
  };
  process.on("SIGINT", onSigint);
  try {
    const result = await runEvaluation(plan, {
      client,
      createEnv,
      onEvent: (event) => view(event),
      signal: controller.signal,
    });
    await dashboard?.close();
    // Short headings that fit the terminal (80 columns when it is not one).
    process.stdout.write(formatEvalTable(result.summary, process.stdout.columns || 80));
    // Under the table, so a judge outage is read together with the scores it zeroed.
    for (const line of summaryWarnings(result.summary)) process.stdout.write(`${redactText(line)}\n`);
    process.stdout.write(`summary: ${summaryPath(plan.outputDir)}\n`);
    if (result.aborted) {
      throw new VagenError(
        `interrupted; ${result.ran} episode(s) finished in this run and were kept`,
        "run the same command again to resume from where it stopped",
        INTERRUPTED_EXIT,
      );
    }
    const failed = errorEpisodes(result.summary);
    if (failed.errors > 0) {
      // So scripts and CI notice a run where the endpoint or an env server was down.
      throw new VagenError(
        `${failed.errors} of ${failed.planned} episode${failed.planned === 1 ? "" : "s"} ended in an error`,
        "each episode's error is in its metrics.json (and in the lines above); run the same command again to retry them, finished episodes are kept",
      );
    }
  } finally {
    await dashboard?.close();
    process.off("SIGINT", onSigint);
    await client.close?.();
  }
}

/** Episodes that ended in an error, out of all the config plans. */
export function errorEpisodes(summary: EvalSummary): { errors: number; planned: number } {
  const envs = Object.values(summary.envs);
  return { errors: envs.reduce((n, e) => n + e.error_episodes, 0), planned: envs.reduce((n, e) => n + e.planned, 0) };
}
