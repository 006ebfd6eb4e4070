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
}

export const SINGLE_RANK: RankContext = { rank: 0, world: 1 };
