/**
 * `vagen train CONFIG.yaml [key.path=value ...]`: PPO (with a critic) or GRPO over the
 * config's envs, in this process. Thin: check the config (everything that can be checked
 * without a model), run the loop with a view of its events, map the ending to an exit
 * status (130 after Ctrl-C).
 */
import type { Command } from "commander";
import { VagenError } from "../../core/errors.ts";
import type { TrainEventListener } from "../../training/events.ts";
import { loadTrainConfig } from "../../training/config.ts";
import { runTraining } from "../../training/trainer.ts";
import { type ImageMode, parseImageMode, resolveImageMode } from "../../tui/image/index.ts";
import { startTrainDashboard } from "../../tui/train-dashboard.ts";
import { trainLogRenderer } from "../render/train-lines.ts";

/** Exit status after Ctrl-C, as shells report a SIGINT death (128 + 2). */
const INTERRUPTED_EXIT = 130;

export function register(program: Command): void {
  program
    .command("train")
    .description("train a model with multi-turn RL (PPO with a critic, GRPO, ...) on environments; checkpoints resume after any crash")
    .argument("<config>", "train config YAML (see examples/train/)")
    .argument("[overrides...]", "key.path=value overrides, e.g. algorithm.adv_estimator=grpo trainer.total_steps=10")
    .option("--quiet-phases", "only the per-step summary lines, not a line per phase")
    .option("--no-tui", "plain lines instead of the dashboard, even on a terminal")
    .option("--image <mode>", "how the dashboard draws observation images: auto, kitty, iterm2, sixel, blocks, none", parseImageModeFlag, "auto")
    .action(async (file: string, overrides: string[], opts: TrainOptions) => {
      await trainCommand(file, overrides, opts);
    });
}

interface TrainOptions {
  quietPhases?: boolean;
  tui: boolean;
  image: ImageMode;
}

function parseImageModeFlag(value: string): ImageMode {
  try {
    return parseImageMode(value);
  } catch (err) {
    throw new VagenError((err as Error).message);
  }
}

async function trainCommand(file: string, overrides: string[], opts: TrainOptions): Promise<void> {
  const checked = await loadTrainConfig(file, overrides);
  const lines = () => trainLogRenderer(process.stderr, { phases: !opts.quietPhases });
  // A terminal gets the dashboard (Ctrl-C there asks before stopping); pipes, CI and --no-tui get lines.
  const dashboard =
    opts.tui && process.stdout.isTTY && process.stdin.isTTY
      ? startTrainDashboard({
          protocol: resolveImageMode(opts.image),
          outputDir: checked.config.trainer.output_dir,
          onSaveAndStop: () => onSigint(),
          onStop: () => void dashboard?.close().then(() => process.exit(INTERRUPTED_EXIT)),
          // q leaves the dashboard; the run goes on with lines.
          onQuit: () => (view = lines()),
        })
      : undefined;
  let view: TrainEventListener = dashboard?.onEvent ?? lines();
  // First Ctrl-C: abandon the step in flight and save a checkpoint of the last finished
  // one. Second Ctrl-C: leave at once (the previous checkpoint is intact).
  const controller = new AbortController();
  const onSigint = () => {
    if (controller.signal.aborted) process.exit(INTERRUPTED_EXIT);
    view({ type: "warning", step: 0, code: "interrupted", message: "interrupted: abandoning this step and saving a checkpoint of the last finished one (Ctrl-C again to quit now)" });
    controller.abort();
  };
  process.on("SIGINT", onSigint);
  try {
    const result = await runTraining(checked, { onEvent: (event) => view(event), signal: controller.signal });
    if (dashboard) {
      await dashboard.close();
      process.stdout.write(dashboard.summary());
    }
    // The exit status travels as an error: main() sets the process's status from it.
    if (result.reason === "interrupted") {
      throw new VagenError(
        `interrupted after step ${result.step}${result.checkpoint ? `; checkpoint ${result.checkpoint}` : ""}`,
        "run the same command again to resume (trainer.resume=auto)",
        INTERRUPTED_EXIT,
      );
    }
  } finally {
    await dashboard?.close();
    process.off("SIGINT", onSigint);
  }
}
