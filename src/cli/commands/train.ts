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

/**
 * Signals that stop a run the way Ctrl-C does: what a terminal, Slurm or Kubernetes
 * (SIGTERM) and a closed SSH session (SIGHUP) send. The exit status is the shell's for a
 * death by that signal (128 + its number), after the checkpoint is saved.
 */
const STOP_SIGNALS = { SIGINT: 130, SIGTERM: 143, SIGHUP: 129 } as const;
type StopSignal = keyof typeof STOP_SIGNALS;
const INTERRUPTED_EXIT = STOP_SIGNALS.SIGINT;

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
          onSaveAndStop: () => onSignal("SIGINT"),
          onStop: () => void dashboard?.close().then(() => process.exit(INTERRUPTED_EXIT)),
          // q leaves the dashboard; the run goes on with lines.
          onQuit: () => (view = lines()),
        })
      : undefined;
  let view: TrainEventListener = dashboard?.onEvent ?? lines();
  // First signal: stop at the next phase boundary (a step before its updates is abandoned
  // and retaken on resume, a step in its updates is finished), then save the last finished
  // step. Second signal: leave at once; the checkpoints already on disk are intact. The
  // trainer yields between micro-batches and engine steps, so this runs within one of them.
  const controller = new AbortController();
  let received: StopSignal | undefined;
  const onSignal = (signal: StopSignal) => {
    if (controller.signal.aborted) {
      view({ type: "warning", step: 0, code: "interrupted", message: `${signal} again: leaving now without saving; the checkpoints on disk are intact` });
      process.exit(STOP_SIGNALS[signal]);
    }
    received = signal;
    view({
      type: "warning",
      step: 0,
      code: "interrupted",
      message: `${signal}: stopping: a step not yet in its updates is abandoned (resume retakes it), one in its updates is finished; then the last finished step is saved (${signal === "SIGINT" ? "Ctrl-C" : signal} again to leave at once)`,
    });
    controller.abort();
  };
  const handlers = Object.keys(STOP_SIGNALS).map((signal) => [signal, () => onSignal(signal as StopSignal)] as const);
  for (const [signal, handler] of handlers) process.on(signal, handler);
  try {
    const result = await runTraining(checked, { onEvent: (event) => view(event), signal: controller.signal });
    if (dashboard) {
      await dashboard.close();
      process.stdout.write(dashboard.summary());
    }
    // The exit status travels as an error: main() sets the process's status from it.
    if (result.reason === "interrupted") {
      throw new VagenError(
        `interrupted${received ? ` by ${received}` : ""} after step ${result.step}${result.checkpoint ? `; checkpoint ${result.checkpoint}` : ""}`,
        "run the same command again to resume (trainer.resume=auto)",
        STOP_SIGNALS[received ?? "SIGINT"],
      );
    }
  } finally {
    await dashboard?.close();
    for (const [signal, handler] of handlers) process.off(signal, handler);
  }
}
