/** Rollouts: episodes through harnesses and the engine, into training rows. */
export type * from "./types.ts";
export { collectRollouts, rolloutMetrics, derivedEpisodeId, type CollectOptions, type RolloutBatch, type RolloutEpisode, type RolloutItem, type RolloutMetrics } from "./collect.ts";
export { rowsFromEpisode, responseCut, type DropReason, type EpisodeIdentity, type EpisodeRows, type RowBudgets, type TurnScores } from "./rows.ts";
