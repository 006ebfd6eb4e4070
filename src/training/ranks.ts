/**
 * Where this process stands in a data-parallel run (see data-parallel.ts): a leaf of types
 * the rollout, the update and the trainer share without importing each other.
 */
import type { ProcessGroup } from "../torch/distributed.ts";

/** This process's place in the run: rank 0 of 1 when not data parallel. */
export interface RankContext {
  rank: number;
  world: number;
  /** The process group; undefined for a world of one. */
  group?: ProcessGroup;
  /**
   * Where the optimizers shard (trainer.zero_stage; ParameterOptimizer reads it from the
   * context it is given): 1, AdamW's state; 2, its state and the reduced gradients.
   * Absent: stage 1 (a context given for ZeRO without a stage).
   */
  zeroStage?: 1 | 2;
}

export const SINGLE_RANK: RankContext = { rank: 0, world: 1 };
