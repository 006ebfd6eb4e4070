/**
 * The batch every advantage estimator reads and the outputs it writes.
 *
 * A batch is B training rows of response width T. Rows come from the rollout layer: under
 * the concat harness one row holds a whole episode; under no_concat or compact an episode
 * is split over several rows (one per conversation), which the trajectory estimators
 * stitch back together (see ../trajectory.ts).
 */
import type { Tensor } from "../../torch/index.ts";

export interface AdvantageBatch {
  /** [B, T] reward per response position (KL-in-reward already folded in). Rewards on mask-0 positions are ignored by every estimator but verl's `grpo` and `rloo`, which sum whole rows as verl does. */
  tokenLevelRewards: Tensor;
  /** [B, T] 1 where the model produced the token, 0 for observations, template tokens and padding. */
  responseMask: Tensor;
  /** [B, T] critic values; values[b, i] is V(state before token i). Required by critic estimators, zeros assumed otherwise. */
  values?: Tensor;
  /** [B] group uid per row: the n rollouts of one dataset item share it (GRPO-style groups). */
  groupIds: readonly string[];
  /** [B] episode id per row. Rows of one episode are stitched into one trajectory. */
  episodeIds?: readonly string[];
  /** [B] rollout index within the group (verl's traj_idx); identifies the episode as (group, trajIndex) when episodeIds is absent. */
  trajIndex?: readonly number[];
  /** [B] conversation ordinal of the row within its episode: 0 under concat, the turn number under no_concat. Orders an episode's rows. */
  turnIndex?: readonly number[];
  /** [B][turns of the row] the env's anchor-state key of each turn the row holds, in order (GiGPO's step groups). */
  stateKeys?: readonly (readonly string[])[];
}

export interface AdvantageOutput {
  /** [B, T] advantages (whitened where the estimator says so). */
  advantages: Tensor;
  /** [B, T] critic targets. */
  returns: Tensor;
  /** [B, T] 1 where the critic loss may look (only estimators that train the critic on a subset of tokens). */
  valueMask?: Tensor;
  /** [B, T] int64: the token's turn ordinal within its trajectory at model tokens, -1 elsewhere. */
  turnIds?: Tensor;
}
