/**
 * `vagen sft CONFIG.yaml [key.path=value ...]`: supervised warm-start of a policy on
 * trajectories (a solver's, or `vagen eval` outputs filtered by success). Thin: load the
 * config, run the loop, print one line per event.
 */
import type { Command } from "commander";
import { loadSftConfig } from "../../sft/config.ts";
import { VagenError } from "../../core/errors.ts";
import { runSft, type SftEvent } from "../../sft/trainer.ts";
import { abortOnStopSignals, signalKey, STOP_SIGNALS } from "../signals.ts";

export function register(program: Command): void {
  program
    .command("sft")
    .description("supervised fine-tuning on trajectories (solver demonstrations or vagen eval outputs); writes checkpoints and a model directory (final/)")
    .argument("<config>", "sft config YAML (see examples/sft/)")
    .argument("[overrides...]", "key.path=value overrides, e.g. train.epochs=3 data.solver.episodes=64")
    .option("--json", "print the result as JSON on the last line")
    .action(async (file: string, overrides: string[], opts: { json?: boolean }) => {
      const config = loadSftConfig(file, overrides);
      // A stop signal (Ctrl-C, SIGTERM, SIGHUP): stop after the step in progress, saved like
      // a last one; a second one leaves at once (the checkpoints on disk are whole).
      const controller = new AbortController();
      const signals = abortOnStopSignals(controller, {
        first: (signal) => process.stderr.write(`${signal}: stopping after this step (${signalKey(signal)} again to leave at once)\n`),
      });
      let result;
      try {
        result = await runSft(config, (event) => process.stderr.write(`${sftEventLine(event)}\n`), { signal: controller.signal });
      } finally {
        signals.off();
      }
      if (result.interrupted) {
        const signal = signals.received ?? "SIGINT";
        throw new VagenError(`sft: interrupted by ${signal} after step ${result.steps}`, `its weights are in ${result.modelDir} (and ${result.checkpoint})`, STOP_SIGNALS[signal]);
      }
      if (opts.json) process.stdout.write(`${JSON.stringify({ model_dir: result.modelDir, checkpoint: result.checkpoint, steps: result.steps, final_loss: result.finalLoss })}\n`);
      else process.stdout.write(`model: ${result.modelDir}\n`);
    });
}

/** One plain line per event. */
export function sftEventLine(event: SftEvent): string {
  switch (event.type) {
    case "data":
      return `sft: ${event.episodes} episodes (success ${event.successRate.toFixed(2)}), ${event.kept} kept -> ${event.samples} samples, ${event.trainedTokens} trained tokens`;
    case "step":
      return `sft step ${event.step}/${event.mayStopEarly ? "up to " : ""}${event.totalSteps} (epoch ${event.epoch}): loss ${event.loss.toFixed(4)}, token accuracy ${event.tokenAccuracy.toFixed(3)}, lr ${event.lr.toExponential(2)}, grad norm ${event.gradNorm.toFixed(3)}`;
    case "checkpoint":
      return `sft checkpoint: ${event.dir}`;
    case "stopped_early":
      return `sft stopped at step ${event.step}: the mean loss of the last steps, ${event.meanLoss.toFixed(4)}, is below train.stop_below_loss ${event.below}`;
    case "probed":
      return `sft probed the policy after step ${event.step}: ${event.stop ? "done, the warm start stops here" : "not done yet"}`;
    case "interrupted":
      return `sft interrupted after step ${event.step}: its weights are saved as the last checkpoint and final/`;
    case "finished":
      return `sft finished: ${event.steps} steps in ${event.seconds.toFixed(1)} s`;
  }
}
