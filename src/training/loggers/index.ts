/**
 * The run's loggers behind one face the trainer calls at four points: each step's
 * scalars, each validation's episodes, each checkpoint, and the end of the run.
 * TensorBoard, W&B and the Hub upload sit behind it; metrics.jsonl stays the trainer's
 * own (it is the record every other view is checked against).
 *
 * None of them can stop training: a W&B or Hub outage becomes counts
 * (`logger/wandb_dropped_rows`, `logger/hf_failed_uploads`, ...) and warnings.
 * See docs/logging.md.
 */
import { join } from "node:path";
import { redactText } from "../../config/redact.ts";
import type { RolloutEpisode } from "../../rollout/index.ts";
import type { TrainEvent } from "../events.ts";
import { TensorBoardWriter } from "../tensorboard.ts";
import { HubUploader } from "./hub.ts";
import type { RetryPolicy } from "./retry.ts";
import type { LoggerPlan } from "./settings.ts";
import { validationTable } from "./validation-table.ts";
import { WandbLogger } from "./wandb.ts";

export { planLoggers, type LoggerPlan } from "./settings.ts";

export interface RunLoggers {
  scalars(step: number, metrics: Record<string, number>): void;
  validation(step: number, episodes: readonly RolloutEpisode[], tags: Map<RolloutEpisode, string>): void;
  checkpointSaved(step: number, checkpoint: string): void;
  /** The loggers' own health for the step's metrics (empty without W&B and the Hub). */
  metrics(): Record<string, number>;
  /** Flushes and waits (W&B: trainer.logger_flush_s; Hub: huggingface_hub.wait_at_end_s); safe to call twice. */
  close(step: number, exitCode: number): Promise<void>;
}

export interface OpenContext {
  resumed: boolean;
  emit: (e: TrainEvent) => void;
  /** Backoff of the network loggers (tests shorten it). */
  retry?: RetryPolicy;
}

export function openRunLoggers(plan: LoggerPlan, ctx: OpenContext): RunLoggers {
  const tensorboard = plan.tensorboard ? new TensorBoardWriter(join(plan.outputDir, "tensorboard")) : undefined;
  const wandb = plan.wandb ? new WandbLogger(plan.wandb, plan, ctx) : undefined;
  const hub = plan.hub ? new HubUploader(plan.hub, { outputDir: plan.outputDir, modelDir: plan.modelDir, emit: ctx.emit, retry: ctx.retry }) : undefined;
  let closed: Promise<void> | undefined;
  return {
    scalars(step, metrics) {
      tensorboard?.scalars(step, metrics);
      wandb?.scalars(step, metrics);
    },
    validation(step, episodes, tags) {
      if (!wandb || plan.valGenerations === 0) return;
      const { values, files } = validationTable(step, episodes, tags, { rows: plan.valGenerations, images: plan.logImages.enable });
      wandb.validation(step, values, files);
    },
    checkpointSaved(step, checkpoint) {
      hub?.checkpointSaved(step, checkpoint);
    },
    metrics() {
      return { ...wandb?.metrics(), ...hub?.metrics() };
    },
    close(step, exitCode) {
      // Never throws: the run's own outcome (and its error) is what the caller reports.
      closed ??= (async () => {
        const results = await Promise.allSettled([hub?.close(step, plan.hub!.waitAtEndS), wandb?.close(exitCode, plan.flushS * 1000)]);
        for (const r of results) if (r.status === "rejected") ctx.emit({ type: "warning", step, code: "logger_close_failed", message: `a logger failed to finish: ${redactText((r.reason as Error).message)}` });
      })();
      return closed;
    },
  };
}
