/**
 * Everything the dashboard reacts to: the trainer's events as they are
 * (src/training/events.ts), eval progress, and episodes loaded for the viewer. Live
 * commands translate their core's events into these; `vagen monitor` makes the same ones
 * out of a run directory's files, so both feed one reducer (state.ts).
 */
import type { EpisodeMetrics } from "../evaluation/episode-metrics.ts";
import type { TrainEvent } from "../training/events.ts";
import type { EpisodeView } from "./episode.ts";

/** The fields of an eval episode's metrics.json the dashboard shows. */
export type EvalEpisodeOutcome = Pick<EpisodeMetrics, "tag" | "seed" | "success" | "cumulative_reward" | "num_turns" | "finish_reason"> & {
  error?: { message: string };
};

export type EvalViewEvent =
  /** The envs of an eval run and how many episodes each plans. */
  | { type: "eval_started"; outputDir: string; model?: string; envs: { tag: string; planned: number }[] }
  /** Episodes in flight right now. */
  | { type: "eval_running"; running: number }
  | { type: "eval_episode"; outcome: EvalEpisodeOutcome }
  | { type: "eval_finished" };

export type ViewEvent =
  /** `vagen monitor` opened a run directory (the live commands send run_started / eval_started). */
  | { type: "run_dir_opened"; kind: "train" | "eval" | "unknown"; outputDir: string; totalSteps?: number }
  /** An episode ready for the viewer (a rollout of `step`, or an eval episode). */
  | { type: "episode_loaded"; episode: EpisodeView }
  /** A line worth showing that is not a warning (resume notes, retries, stops). */
  | { type: "note"; message: string }
  /**
   * A live view is up before its run has started (a model loading takes seconds): the
   * kind of run, and what it is doing meanwhile. Cleared by run_started / eval_started.
   */
  | { type: "starting"; kind: "train" | "eval"; message: string }
  /** A checkpoint folder seen before is gone (pruned by keep_checkpoints, or deleted). */
  | { type: "checkpoint_removed"; path: string };

export type DashboardEvent = TrainEvent | EvalViewEvent | ViewEvent;
