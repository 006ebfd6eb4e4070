/**
 * The plain view of a `vagen train` run, drawn from the trainer's events
 * (src/training/events.ts): a line per phase and a one-line summary per step, for CI
 * logs, files and pipes. The live dashboard is src/tui's.
 *
 *   train: steps 1..3, default_gae with a critic, envs sokoban, cpu f32 -> runs/train/tiny-cpu
 *   [step 1/3] rollout 7.2 s
 *   [step 1/3] score 0.000 success sokoban 0.00 | pg_loss 0.0012 vf_loss 0.10 entropy 5.89 kl 0.0000 | 42.1 s (gen 17%)
 */
import { redactText } from "../../config/index.ts";
import type { TrainEvent, TrainEventListener } from "../../training/events.ts";
import type { Writable } from "./writable.ts";

const fmt = (x: number | undefined, digits = 3) => (x === undefined ? "-" : x.toFixed(digits));

export function trainLogRenderer(out: Writable = process.stderr, opts: { phases?: boolean } = {}): TrainEventListener {
  const say = (text: string) => out.write(redactText(text));
  let total = 0;
  return (event: TrainEvent) => {
    switch (event.type) {
      case "run_started":
        total = event.totalSteps;
        say(
          `train: steps ${event.startStep + 1}..${event.totalSteps}, ${event.estimator}${event.useCritic ? " with a critic" : ""}, envs ${event.envs.join(", ")}, ${event.device} ${event.dtype} -> ${event.outputDir}${event.resumedFrom ? ` (resumed from ${event.resumedFrom})` : ""}\n`,
        );
        return;
      case "phase_finished":
        if (opts.phases ?? true) say(`[step ${event.step}/${total}] ${event.phase} ${event.seconds.toFixed(1)} s\n`);
        return;
      case "metrics": {
        const m = event.metrics;
        const success = Object.entries(m)
          .filter(([k]) => k.startsWith("train/") && k.endsWith("/success_rate"))
          .map(([k, v]) => `${k.slice(6, -13)} ${v.toFixed(2)}`)
          .join(" ");
        say(
          `[step ${event.step}/${total}] score ${fmt(m["critic/score/mean"])} success ${success || "-"} | pg_loss ${fmt(m["actor/pg_loss"], 4)} vf_loss ${fmt(m["critic/vf_loss"], 4)} entropy ${fmt(m["actor/entropy"], 2)} kl ${fmt(m["actor/ppo_kl"], 4)} | ${fmt(m["timing_s/step"], 1)} s (gen ${Math.round((m["perf/generation_share"] ?? 0) * 100)}%)\n`,
        );
        return;
      }
      case "validation":
        say(`[step ${event.step}/${total}] validation mean reward ${event.meanReward.toFixed(3)}${event.best ? " (best so far: best_actor saved)" : ""}\n`);
        return;
      case "checkpoint_saved":
        if (!event.bestActor) say(`[step ${event.step}/${total}] checkpoint ${event.path} (${event.seconds.toFixed(1)} s)\n`);
        return;
      case "warning":
        say(`warning [${event.code}]: ${event.message}\n`);
        return;
      case "run_finished":
        // A failure names the step that was running, not the last finished one.
        say(`train: ${event.reason} ${event.failedStep !== undefined ? `in step ${event.failedStep} (${event.step} finished)` : `at step ${event.step}`}${event.checkpoint ? `; last checkpoint ${event.checkpoint}` : ""}${event.error ? `: ${event.error}` : ""}\n`);
        return;
      default:
        return;
    }
  };
}
