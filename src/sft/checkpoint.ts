/**
 * What a supervised run writes, in the RL trainer's format, so the tools that read a
 * training run read it too:
 *
 *   output_dir/config.yaml              the checked config (paths absolute, secrets redacted)
 *   output_dir/checkpoints/step_<N>/    actor/ (weights, AdamW moments) and state.json,
 *                                       written by src/training/checkpoint.ts (atomic)
 *   output_dir/final/                   the last checkpoint's actor as a model directory,
 *                                       what `vagen export` makes of it: `vagen eval`,
 *                                       `vagen serve` and `model.model_dir` take it
 *
 * state.json holds the loop's position (step, epoch and samples of it done, scheduler
 * step, libtorch's generator); a supervised run has no KL coefficient (0) and no
 * validation (null).
 */
import { mkdirSync, renameSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import YAML from "yaml";
import type * as torch from "../torch/index.ts";
import { redactSecrets } from "../config/index.ts";
import { saveCheckpoint, torchRngHex } from "../training/checkpoint.ts";
import { exportCheckpoint } from "../training/export.ts";
import type { TrainingModel } from "../training/forward.ts";
import type { SftConfig } from "./config.ts";

/** Where the loop stands when it saves. */
export interface SftPosition {
  /** Optimizer steps taken. */
  step: number;
  /** The epoch in progress (0-based) and how many of its samples were trained on. */
  epoch: number;
  cursor: number;
  /** The learning-rate scheduler's step. */
  schedulerStep: number;
}

/** Every checkpoint of a run stays: epochs are few, and each may be the warm start wanted. */
const KEEP_ALL = Number.POSITIVE_INFINITY;

/** Writes `root/step_<N>` for the model's weights and the optimizer's state; returns its path. */
export function saveSftCheckpoint(root: string, model: TrainingModel, optimizer: torch.optim.Optimizer, position: SftPosition): string {
  return saveCheckpoint(
    root,
    { actor: { weights: model.weights, optimizer: optimizer.stateDict() } },
    {
      step: position.step,
      data: { epoch: position.epoch, cursor: position.cursor },
      actorSchedulerStep: position.schedulerStep,
      klCoef: 0,
      bestValReward: null,
      torchRngState: torchRngHex(),
    },
    KEEP_ALL,
  );
}

/**
 * The checkpoint's actor as a model directory at `out`, the base model's other files
 * beside it (a LoRA run's adapter merged in, so final/ loads as any model does).
 */
export function writeFinalModel(checkpoint: string, baseModelDir: string, out: string): string {
  return exportCheckpoint(checkpoint, out, { base: baseModelDir, force: true, merge: true }).out;
}

/** `output_dir/config.yaml`, written whole or not at all. */
export function writeSftConfig(config: SftConfig): void {
  mkdirSync(config.output_dir, { recursive: true });
  const path = join(config.output_dir, "config.yaml");
  const tmp = `${path}.tmp-${process.pid}`;
  writeFileSync(tmp, YAML.stringify(redactSecrets(config)));
  renameSync(tmp, path);
}
