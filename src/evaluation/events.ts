/**
 * The eval runner's events: everything a view (the plain line log and progress bar in
 * src/cli, the live terminal UI in src/tui) needs to show a `vagen eval` run, as one
 * typed union. The runner only emits, through `EvalDependencies.onEvent`; it never
 * writes to a terminal.
 *
 * Order within a run: `run_started`; then per episode `episode_started`, its
 * `turn_finished`s and `episode_finished` (episodes interleave when several run at
 * once); `warning`s at any time; after the last episode one `env_summary` per env in
 * config order; `run_finished` last. Episodes skipped on resume get no events of their
 * own: `run_started` counts them.
 *
 * Text in events is as the model and envs produced it, except that episode errors and
 * summaries are already redacted (they are what the files hold). Renderers that write
 * anywhere still pass their output through the secret redaction.
 */
import type { RGBImage } from "../core/image.ts";
import type { FinishReason } from "./episode-metrics.ts";
import type { EnvSummary, EvalSummary } from "./summary.ts";

/** Counts across the whole run, as of the event that carries them. */
export interface EvalProgress {
  /** Episodes finished in this run plus those skipped as already done. */
  done: number;
  /** Episodes the plan asks for (skipped ones included). */
  total: number;
  /** Episodes in flight. */
  running: number;
  /** Successful episodes among `done`. */
  successes: number;
  /** Episodes of this run that ended in an error (model, env, or outside the harness). */
  errors: number;
}

/** One env of the plan, as `run_started` shows it. */
export interface PlannedEnvSummary {
  /** The env's key under `envs:` (names its output folder and summary row). */
  tag: string;
  /** Registered env name or import path. */
  envName: string;
  /** Harness name or import path. */
  harness: string;
  maxTurns: number;
  /** Episodes the config asks for. */
  episodes: number;
  /** Of those, already finished in an earlier run (resume) and not run again. */
  skipped: number;
}

/** The run is planned and about to start its first episode. */
export interface RunStartedEvent {
  type: "run_started";
  outputDir: string;
  /** The client's description (a model name, never a secret). */
  model: string;
  /** Episodes running at once at most. */
  maxConcurrentEpisodes: number;
  /** Every env of the plan, in config order. */
  envs: PlannedEnvSummary[];
  /** Counts before any episode ran: `done` = skipped, `running` = 0. */
  progress: EvalProgress;
}

/** An episode was picked up by a worker; its env is about to be built and reset. */
export interface EpisodeStartedEvent {
  type: "episode_started";
  tag: string;
  envName: string;
  seed: number;
  /** The episode's output folder (written when it finishes). */
  dir: string;
  /** Counts with this episode already among `running`. */
  progress: EvalProgress;
}

/** What the env made of the model's answer (read from the step's info; fields the env did not set are absent). */
export interface ParsedAction {
  /** The actions the env parsed from the answer, in order (`info.actions`). */
  actions?: string[];
  /** true: well formed, false: malformed (`info.format_correct`, or its turn metric). */
  formatCorrect?: boolean;
  /** The reasoning part (`info.think_content`). */
  think?: string;
  /** The answer part the actions came from (`info.action_content`). */
  answer?: string;
}

/** A turn's reward, split as far as the env reports it. */
export interface TurnReward {
  /** The step's reward: everything the env paid for the turn. */
  total: number;
  /** World-model rewards the env reported as `info["state_reward/<name>"]` (VAGEN main's keys), by name; empty when none. */
  worldModel: Record<string, number>;
  /** `total` less the world-model parts: the env's own task and format reward. */
  env: number;
}

/** An observation image of a turn. */
export interface ImageRef {
  /** Where the PNG is written, relative to the episode's folder (`images/obs_01_0.png`); written when the episode finishes. */
  path: string;
  width: number;
  height: number;
  /** The pixels themselves (shared with the harness, not copied), for views that draw them live. */
  image: RGBImage;
}

/** One model turn of an episode ended: the model answered and the env stepped. */
export interface TurnFinishedEvent {
  type: "turn_finished";
  tag: string;
  seed: number;
  /** 1-based. */
  turn: number;
  maxTurns: number;
  /** The model's answer, verbatim. */
  text: string;
  /** Why generation stopped ("stop", "length", ...). */
  completionFinishReason: string;
  action: ParsedAction;
  reward: TurnReward;
  done: boolean;
  /** The observation the env returned after this turn: its text and images. */
  observationText: string;
  images: ImageRef[];
}

/** An episode ended (normally, or in an error) and its folder is written. */
export interface EpisodeFinishedEvent {
  type: "episode_finished";
  tag: string;
  envName: string;
  seed: number;
  dir: string;
  success: boolean;
  /** Cumulative reward. */
  reward: number;
  turns: number;
  finishReason: FinishReason;
  /** Set when the episode ended in an error (redacted, as in metrics.json). */
  error?: { kind: string; message: string };
  /** Counts with this episode among `done` and no longer `running`. */
  progress: EvalProgress;
}

/** One env's results after the run, from what is on disk (this run's and earlier ones'). */
export interface EnvSummaryEvent {
  type: "env_summary";
  tag: string;
  summary: EnvSummary;
}

/** The run ended; summary.json is written. */
export interface RunFinishedEvent {
  type: "run_finished";
  /** The summary as written to summary.json. */
  summary: EvalSummary;
  summaryPath: string;
  /** Episodes run (and written) in this run. */
  ran: number;
  /** Episodes skipped as already finished. */
  skipped: number;
  /** The run was stopped (Ctrl-C) before every episode ran. */
  aborted: boolean;
  progress: EvalProgress;
}

/** Something the user should know that does not stop the run. */
export interface WarningEvent {
  type: "warning";
  /**
   * A short stable name: "retry" (a request is retried after a failure), "interrupted"
   * (Ctrl-C: no new episodes start), "judge_failures" (the world-model judge failed and
   * those sections scored 0; told once per run, when first seen).
   */
  code: string;
  message: string;
}

export type EvalEvent =
  | RunStartedEvent
  | EpisodeStartedEvent
  | TurnFinishedEvent
  | EpisodeFinishedEvent
  | EnvSummaryEvent
  | RunFinishedEvent
  | WarningEvent;

export type EvalEventListener = (event: EvalEvent) => void;
