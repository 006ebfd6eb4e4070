/**
 * The trainer's events: everything a view (the plain line log in src/cli, the live
 * terminal UI in src/tui) needs to show a run, as one typed union. The trainer only
 * emits; it never writes to a terminal.
 *
 * Numbers are plain JS numbers (read off the device already); times are seconds.
 */

/** The phases of one training step, in the order they run. */
export const TRAIN_PHASES = [
  "validation",
  "rollout",
  "old_logprobs",
  "ref_logprobs",
  "values",
  "advantages",
  "critic_update",
  "actor_update",
  "checkpoint",
] as const;
export type TrainPhase = (typeof TRAIN_PHASES)[number];

/** The run is set up (config resolved, model loaded) and about to take its first step. */
export interface RunStartedEvent {
  type: "run_started";
  outputDir: string;
  /** The step the run starts from (0, or the resumed checkpoint's step). */
  startStep: number;
  totalSteps: number;
  estimator: string;
  useCritic: boolean;
  /** Env names as configured, in config order. */
  envs: string[];
  device: string;
  dtype: string;
  /** Set when the run continues from a checkpoint. */
  resumedFrom?: string;
}

export interface StepStartedEvent {
  type: "step_started";
  /** 1-based: the step being taken. */
  step: number;
  totalSteps: number;
}

export interface PhaseStartedEvent {
  type: "phase_started";
  step: number;
  phase: TrainPhase;
  /** Units of work the phase will do when known (episodes, mini-batches, ...). */
  total?: number;
}

export interface PhaseProgressEvent {
  type: "phase_progress";
  step: number;
  phase: TrainPhase;
  done: number;
  total?: number;
}

export interface PhaseFinishedEvent {
  type: "phase_finished";
  step: number;
  phase: TrainPhase;
  seconds: number;
}

/** One episode of a rollout (training or validation) ended. */
export interface EpisodeFinishedEvent {
  type: "episode_finished";
  step: number;
  /** Training rollouts or validation. */
  split: "train" | "val";
  env: string;
  episodeId: string;
  seed: number;
  reward: number;
  success: boolean;
  turns: number;
  /** Why it ended with an error, if it did. */
  error?: string;
}

/** The step's metrics, exactly as written to metrics.jsonl. */
export interface MetricsEvent {
  type: "metrics";
  step: number;
  metrics: Record<string, number>;
}

/** A validation pass finished; metrics are the `val/...` entries. */
export interface ValidationEvent {
  type: "validation";
  /** The step validation ran after (0: before training). */
  step: number;
  metrics: Record<string, number>;
  /** Mean validation reward over all envs, the number the best actor is chosen by. */
  meanReward: number;
  /** This validation is the best so far (the best actor was saved). */
  best: boolean;
}

export interface CheckpointSavedEvent {
  type: "checkpoint_saved";
  step: number;
  path: string;
  seconds: number;
  /** The best-actor copy, rather than a resumable checkpoint. */
  bestActor: boolean;
}

/** Something the user should know but that does not stop the run. */
export interface WarningEvent {
  type: "warning";
  step: number;
  /** A short stable name (e.g. "logprob_mismatch", "degenerate_responses"). */
  code: string;
  message: string;
}

export interface StepFinishedEvent {
  type: "step_finished";
  step: number;
  totalSteps: number;
  seconds: number;
}

/** The run ended; `reason` says how. */
export interface RunFinishedEvent {
  type: "run_finished";
  /** The last completed step. */
  step: number;
  reason: "completed" | "interrupted" | "failed" | "watchdog";
  /** The last checkpoint written, if any. */
  checkpoint?: string;
  /** Set for failed and watchdog ends. */
  error?: string;
  /** Failed and watchdog ends: the step that was running when it failed (step + 1). */
  failedStep?: number;
}

export type TrainEvent =
  | RunStartedEvent
  | StepStartedEvent
  | PhaseStartedEvent
  | PhaseProgressEvent
  | PhaseFinishedEvent
  | EpisodeFinishedEvent
  | MetricsEvent
  | ValidationEvent
  | CheckpointSavedEvent
  | WarningEvent
  | StepFinishedEvent
  | RunFinishedEvent;

export type TrainEventListener = (event: TrainEvent) => void;
