/**
 * Training rows: what the rollout layer hands the trainer (VAGEN main 2026 section 4.6).
 *
 * A row is one token-level conversation (src/models/conversation.ts) cut into a prompt
 * and a response. Under the concat harness an episode is one row; under no_concat and
 * compact every model call is its own row, and the identity columns (group, episode,
 * trajectory, conversation ordinal) let the estimators stitch an episode's rows back
 * together (src/algorithms/trajectory.ts).
 *
 * Token-in, token-out: a row's mask-1 tokens are exactly the ids the engine sampled (the
 * end-of-turn id included), with the engine's log-probs; prompt, observation, template
 * and image tokens are mask 0. Rewards sit on response positions as the env placed them
 * (a turn's outcome reward on the turn's last sampled token; world-model section scores
 * on their section's last token); mask-0 positions never carry reward.
 *
 * Rows are host data (plain arrays); the training forward (src/training/forward.ts) packs
 * them into a padded batch.
 */
import type { RGBImage } from "../core/image.ts";

/** Where one image's placeholder tokens sit, relative to the row's full sequence (prompt + response). */
export interface RowImage {
  offset: number;
  length: number;
  image: RGBImage;
  /** The family processor's patch grid (Qwen: [t, h, w]). */
  grid: readonly number[];
}

/** Why a row's response ends before its conversation did, if it does. */
export type RowTruncation = "none" | "response_length" | "prompt_length" | "context";

export interface TrainingRow {
  /** Group uid: the `n` rollouts of one dataset item share it. */
  uid: string;
  /** Episode id (stable under a fixed seed), shared by all rows of one episode. */
  episodeId: string;
  /** Rollout index within the group (verl's traj_idx). */
  trajIndex: number;
  /** Conversation ordinal within the episode: 0 under concat, the model call's number otherwise. */
  turnIndex: number;
  /** Env name (as configured) and the seed the episode was reset with. */
  env: string;
  seed: number;

  promptIds: number[];
  responseIds: number[];
  /** Per response token: 1 where the model sampled it. */
  responseMask: number[];
  /** Per response token: the engine's sampling log-prob at mask-1 positions, 0 elsewhere. */
  rolloutLogprobs: number[];
  /** False when some sampled token came without a log-prob (then rolloutLogprobs is not usable). */
  logprobsComplete: boolean;
  /** Per response token: reward placed on it (0 at mask-0 positions). */
  tokenRewards: number[];
  /** Response-relative [start, end) of each model span (turn) in the row, in order. */
  responseSpans: { start: number; end: number }[];
  /** The images of prompt and response, in sequence order, offsets into promptIds ++ responseIds. */
  images: RowImage[];

  /** Sum of the episode's env rewards (the same on every row of the episode). */
  episodeReward: number;
  /** The env's success flag at the episode's end. */
  success: boolean;
  /** Env turns the episode took. */
  episodeTurns: number;
  /** True on the episode's last row. */
  lastTurn: boolean;
  /** This conversation ended with a model-written summary (compact harness). */
  endsWithSummary: boolean;
  truncation: RowTruncation;
  /**
   * Per trained span of the row (`responseSpans`), the key of the state it answered
   * (GiGPO's anchor states): the env's `state_key` when it gives one, else a hash of the
   * observation; "summary" for a summary. Always set by rowsFromEpisode.
   */
  stateKeys?: string[];
  /** Named reward parts summed over the row (format, env, state_estimation, ...), for metrics. */
  rewardParts: Record<string, number>;
}
