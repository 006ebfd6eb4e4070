/**
 * The dashboard's state and the pure reducer that folds events into it. Live views and
 * `vagen monitor` feed the same reducer, so what a run shows live and what its files
 * show afterwards agree. `now` (ms) comes with every event so rates and ETAs stay
 * testable.
 */
import type { TrainPhase } from "../training/events.ts";
import type { EpisodeView } from "./episode.ts";
import type { DashboardEvent, EvalEpisodeOutcome } from "./events.ts";

/** A metric over steps: parallel arrays, steps ascending. */
export interface Series {
  steps: number[];
  values: number[];
}

export interface PhaseState {
  step: number;
  name: TrainPhase;
  done: number;
  total?: number;
  startedAt: number;
  /** Units of work per second since the phase started. */
  rate?: number;
}

export interface EvalEnvState {
  tag: string;
  planned: number;
  done: number;
  successes: number;
  errors: number;
  rewardSum: number;
}

export interface Notice {
  /** Training step it happened at, when there is one. */
  step?: number;
  code: string;
  message: string;
  /** How many times it repeated (shown once with a count, so a flood can't push the layout). */
  count: number;
}

export interface DashboardState {
  kind: "train" | "eval" | "unknown";
  outputDir?: string;
  startedAt?: number;
  now: number;
  // Training
  step: number;
  startStep: number;
  totalSteps?: number;
  /** Seconds of the steps finished in this session (for the ETA). */
  stepSeconds: number[];
  phase?: PhaseState;
  series: Record<string, Series>;
  validation?: { step: number; metrics: Record<string, number>; meanReward?: number; best?: boolean };
  /** Every validation's mean reward over the run (the last one's table is `validation`). */
  validations: Series;
  checkpoints: { step: number; path: string; bestActor: boolean }[];
  /** Episodes of the current step's rollout: finished, succeeded. */
  rolloutEpisodes: { step: number; done: number; successes: number; rewardSum: number };
  // Eval
  evalEnvs: EvalEnvState[];
  evalRunning: number;
  failures: { tag: string; seed: number; reason: string; message?: string }[];
  // Both
  episodes: EpisodeView[];
  warnings: Notice[];
  notes: string[];
  finished?: { reason: string; error?: string; checkpoint?: string };
  /** What a live view waits for before its run has started (see the `starting` event). */
  starting?: string;
  /**
   * Where the state comes from: the run's own events ("live") or its files
   * (`vagen monitor`), which record steps but not the phase in flight.
   */
  source: "live" | "files";
}

/** Episodes kept for the viewer; older ones drop off the front. */
export const MAX_EPISODES = 256;
const MAX_NOTICES = 50;
const MAX_CHECKPOINTS = 20;
const MAX_FAILURES = 50;

export function initialState(now = 0): DashboardState {
  return {
    kind: "unknown",
    now,
    step: 0,
    startStep: 0,
    stepSeconds: [],
    series: {},
    validations: { steps: [], values: [] },
    checkpoints: [],
    rolloutEpisodes: { step: 0, done: 0, successes: 0, rewardSum: 0 },
    evalEnvs: [],
    evalRunning: 0,
    failures: [],
    episodes: [],
    warnings: [],
    notes: [],
    source: "live",
  };
}

function appendSeries(series: Record<string, Series>, step: number, metrics: Record<string, number>): Record<string, Series> {
  const next = { ...series };
  for (const [key, value] of Object.entries(metrics)) {
    if (typeof value !== "number" || key === "step") continue;
    // Own keys only: a metric named "constructor" or "toString" is a metric, not Object's.
    // A step reported again (a resumed run, a re-read file) replaces its value.
    next[key] = appendPoint(Object.hasOwn(next, key) ? next[key]! : { steps: [], values: [] }, step, value);
  }
  return next;
}

/** `series` with (step, value) added: a step reported again replaces its value, an older step is ignored. */
function appendPoint(series: Series, step: number, value: number): Series {
  const last = series.steps.length - 1;
  if (last >= 0 && series.steps[last] === step) return { steps: series.steps, values: [...series.values.slice(0, last), value] };
  if (last >= 0 && series.steps[last]! > step) return series;
  return { steps: [...series.steps, step], values: [...series.values, value] };
}

function addNotice(list: Notice[], notice: Omit<Notice, "count">): Notice[] {
  const same = list.findIndex((n) => n.code === notice.code && n.message === notice.message);
  if (same >= 0) {
    const updated = { ...list[same]!, step: notice.step ?? list[same]!.step, count: list[same]!.count + 1 };
    return [...list.slice(0, same), ...list.slice(same + 1), updated];
  }
  return [...list, { ...notice, count: 1 }].slice(-MAX_NOTICES);
}

function evalEpisode(state: DashboardState, outcome: EvalEpisodeOutcome): DashboardState {
  const failed = outcome.finish_reason === "model_error" || outcome.finish_reason === "env_error" || outcome.finish_reason === "error";
  let envs = state.evalEnvs;
  if (!envs.some((e) => e.tag === outcome.tag)) envs = [...envs, { tag: outcome.tag, planned: 0, done: 0, successes: 0, errors: 0, rewardSum: 0 }];
  envs = envs.map((e) =>
    e.tag !== outcome.tag
      ? e
      : {
          ...e,
          planned: Math.max(e.planned, e.done + 1),
          done: e.done + 1,
          successes: e.successes + (outcome.success ? 1 : 0),
          errors: e.errors + (failed ? 1 : 0),
          rewardSum: e.rewardSum + outcome.cumulative_reward,
        },
  );
  const failures = failed
    ? [...state.failures, { tag: outcome.tag, seed: outcome.seed, reason: outcome.finish_reason, message: outcome.error?.message }].slice(-MAX_FAILURES)
    : state.failures;
  return { ...state, kind: "eval", evalEnvs: envs, failures };
}

export function reduce(state: DashboardState, event: DashboardEvent, now: number): DashboardState {
  const s: DashboardState = { ...state, now, startedAt: state.startedAt ?? now };
  switch (event.type) {
    case "run_started":
      return { ...s, kind: "train", outputDir: event.outputDir, step: event.startStep, startStep: event.startStep, totalSteps: event.totalSteps, startedAt: now, starting: undefined };
    case "step_started":
      return { ...s, step: event.step, totalSteps: event.totalSteps, rolloutEpisodes: { step: event.step, done: 0, successes: 0, rewardSum: 0 } };
    case "phase_started":
      return { ...s, phase: { step: event.step, name: event.phase, done: 0, total: event.total, startedAt: now } };
    case "phase_progress": {
      const started = s.phase?.name === event.phase && s.phase.step === event.step ? s.phase.startedAt : now;
      const seconds = (now - started) / 1000;
      const total = event.total ?? (s.phase?.name === event.phase ? s.phase.total : undefined);
      return { ...s, phase: { step: event.step, name: event.phase, done: event.done, total, startedAt: started, rate: seconds > 0 ? event.done / seconds : undefined } };
    }
    case "phase_finished":
      return s.phase?.name === event.phase ? { ...s, phase: { ...s.phase, done: s.phase.total ?? s.phase.done } } : s;
    case "episode_finished": {
      if (event.split !== "train") return s;
      const r = s.rolloutEpisodes.step === event.step ? s.rolloutEpisodes : { step: event.step, done: 0, successes: 0, rewardSum: 0 };
      const next = { ...s, rolloutEpisodes: { step: event.step, done: r.done + 1, successes: r.successes + (event.success ? 1 : 0), rewardSum: r.rewardSum + event.reward } };
      return event.error ? { ...next, warnings: addNotice(s.warnings, { step: event.step, code: "episode_error", message: `${event.env} seed ${event.seed}: ${event.error}` }) } : next;
    }
    case "metrics":
      return { ...s, kind: s.kind === "unknown" ? "train" : s.kind, step: Math.max(s.step, event.step), series: appendSeries(s.series, event.step, event.metrics) };
    case "validation": {
      // A validation without a mean (no reward metric) keeps its table but adds no point.
      const validations = Number.isFinite(event.meanReward) ? appendPoint(s.validations, event.step, event.meanReward) : s.validations;
      return { ...s, validation: { step: event.step, metrics: event.metrics, meanReward: event.meanReward, best: event.best }, validations };
    }
    case "checkpoint_saved": {
      // A folder written again (best_actor is replaced in place) is one checkpoint, the newest.
      const others = s.checkpoints.filter((c) => c.path !== event.path);
      return { ...s, checkpoints: [...others, { step: event.step, path: event.path, bestActor: event.bestActor }].slice(-MAX_CHECKPOINTS) };
    }
    case "checkpoint_removed":
      return { ...s, checkpoints: s.checkpoints.filter((c) => c.path !== event.path) };
    case "warning":
      return { ...s, warnings: addNotice(s.warnings, { step: event.step, code: event.code, message: event.message }) };
    case "step_finished":
      return { ...s, step: event.step, totalSteps: event.totalSteps, stepSeconds: [...s.stepSeconds, event.seconds].slice(-1000), phase: undefined };
    case "run_finished":
      return { ...s, phase: undefined, finished: { reason: event.reason, error: event.error, checkpoint: event.checkpoint } };
    case "eval_started": {
      const known = new Map(s.evalEnvs.map((e) => [e.tag, e]));
      const envs = event.envs.map(({ tag, planned }) => ({ ...(known.get(tag) ?? { tag, done: 0, successes: 0, errors: 0, rewardSum: 0 }), planned }));
      return { ...s, kind: "eval", outputDir: event.outputDir, evalEnvs: envs, startedAt: now, starting: undefined };
    }
    case "eval_running":
      return { ...s, evalRunning: event.running };
    case "eval_episode":
      return evalEpisode(s, event.outcome);
    case "eval_finished":
      return { ...s, evalRunning: 0, finished: { reason: "completed" } };
    case "run_dir_opened":
      return { ...s, kind: event.kind, outputDir: event.outputDir, totalSteps: event.totalSteps ?? s.totalSteps, source: "files", starting: undefined };
    case "starting":
      return { ...s, kind: event.kind, starting: event.message };
    case "episode_loaded": {
      // An episode seen before (running, now written) keeps its place in the list.
      const at = s.episodes.findIndex((e) => e.id === event.episode.id);
      if (at >= 0) return { ...s, episodes: s.episodes.map((e, i) => (i === at ? event.episode : e)) };
      return { ...s, episodes: [...s.episodes, event.episode].slice(-MAX_EPISODES) };
    }
    case "note":
      return { ...s, notes: [...s.notes, event.message].slice(-MAX_NOTICES) };
  }
}

/** verl's per-step wall time, what a run directory offers when there are no step events. */
const STEP_TIME_KEY = "timing_s/step";

/**
 * Seconds left for the remaining steps at the mean pace of the steps so far (from
 * step_finished events, or else the run's `timing_s/step` metric); none for a run that
 * has finished.
 */
export function stepEta(state: DashboardState): number | undefined {
  if (state.finished) return undefined;
  const seconds = state.stepSeconds.length > 0 ? state.stepSeconds : (state.series[STEP_TIME_KEY]?.values ?? []);
  if (!state.totalSteps || seconds.length === 0) return undefined;
  const mean = seconds.reduce((a, b) => a + b, 0) / seconds.length;
  return Math.max(0, state.totalSteps - state.step) * mean;
}

/** The latest value of a metric, if it was ever reported. */
export function latest(state: DashboardState, key: string): number | undefined {
  const series = state.series[key];
  return series && series.values.length > 0 ? series.values[series.values.length - 1] : undefined;
}
