/**
 * Reads a run directory as it grows and turns what is new into dashboard events, for
 * `vagen monitor`. Two layouts:
 *
 * - training runs: `metrics.jsonl` (one JSON object per step: `step` and verl's metric
 *   names, `val/...` entries on validation steps), episode folders under
 *   `rollouts/step_<N>/` (the trainer's `<NNN>_<tag>_seed<S>_traj<T>/`, or eval's
 *   `<tag>/seed_<S>/`), `checkpoints/<step_N | global_step_N | best...>/`, and the run's
 *   `config.yaml`;
 * - eval runs: `config.yaml`, `<tag>/seed_<S>/` episode folders and, once finished,
 *   `summary.json` (src/evaluation/layout.ts).
 *
 * Files are read incrementally: metrics.jsonl from where the last poll stopped (a line
 * still being written waits for its newline; Python's bare `NaN` / `Infinity` are read as
 * missing values rather than making the line unreadable), episode folders once each (they appear
 * whole: outputs are renamed into place).
 *
 * The files may be anything (a crashed writer, a copied fragment, junk): a line that is
 * not a metrics record is skipped with a warning naming the file and the line, text is
 * made printable (`printable.ts`) before it reaches a terminal, and a directory that
 * disappears under the reader is reported once (`gone`) instead of read as empty forever.
 * A training run is finished when metrics.jsonl reaches the config's total steps: the
 * trainer writes a step's line after the step, so that line is the run's last.
 */
import { closeSync, existsSync, openSync, readFileSync, readSync, readdirSync, statSync } from "node:fs";
import { join } from "node:path";
import { parse as parseYaml } from "yaml";
import { parseMetricsJson } from "../core/plot/metrics-file.ts";
import type { DashboardEvent } from "./events.ts";
import { loadEpisode } from "./episode.ts";
import { printable, printableLine } from "./printable.ts";

export type RunKind = "train" | "eval" | "unknown";

/** Rollout steps whose episodes are loaded for the viewer (the newest ones). */
const ROLLOUT_STEPS_LOADED = 2;

/** Unreadable lines of metrics.jsonl named one by one; the rest are counted under one warning. */
const LINE_WARNINGS = 5;

/** How much of an unreadable line a warning quotes. */
const QUOTED_CHARS = 60;

/** The record and step of a metrics.jsonl line, or why the line is not a metrics record. */
function parseMetricsLine(line: string): { problem: string } | { record: Record<string, unknown>; step: number } {
  let value: unknown;
  try {
    value = parseMetricsJson(line);
  } catch {
    return { problem: `not JSON: ${printableLine(line.slice(0, QUOTED_CHARS))}` };
  }
  if (typeof value !== "object" || value === null || Array.isArray(value)) {
    return { problem: `expected a JSON object with a numeric "step", got ${value === null ? "null" : Array.isArray(value) ? "an array" : typeof value}` };
  }
  const record = value as Record<string, unknown>;
  const step = record.step;
  if (typeof step !== "number" || !Number.isInteger(step) || step < 0) {
    return { problem: `expected a numeric "step" (a whole number >= 0), got ${step === undefined ? "none" : typeof step === "number" ? String(step) : printableLine(JSON.stringify(step).slice(0, QUOTED_CHARS))}` };
  }
  return { record, step };
}

function listDirs(dir: string): string[] {
  try {
    return readdirSync(dir, { withFileTypes: true })
      .filter((e) => e.isDirectory() && !e.name.startsWith("."))
      .map((e) => e.name);
  } catch {
    return [];
  }
}

function readYaml(path: string): Record<string, unknown> | undefined {
  try {
    const value = parseYaml(readFileSync(path, "utf8"));
    return value && typeof value === "object" ? (value as Record<string, unknown>) : undefined;
  } catch {
    return undefined;
  }
}

/** `step_12` -> 12, `global_step_12` -> 12. */
function stepOf(name: string): number | undefined {
  const match = /(?:^|_)step_(\d+)$/.exec(name);
  return match ? Number(match[1]) : undefined;
}

function seedOf(name: string): number | undefined {
  const match = /^seed_(-?\d+)$/.exec(name);
  return match ? Number(match[1]) : undefined;
}

export function detectRunKind(dir: string): RunKind {
  if (existsSync(join(dir, "metrics.jsonl")) || existsSync(join(dir, "rollouts"))) return "train";
  const config = readYaml(join(dir, "config.yaml"));
  if ((config && "envs" in config && "model" in config) || existsSync(join(dir, "summary.json"))) return "eval";
  return "unknown";
}

/** Total training steps as the run's config states them (verl's key, or vagen's). */
function totalStepsOf(config: Record<string, unknown> | undefined): number | undefined {
  const trainer = config?.trainer as Record<string, unknown> | undefined;
  const value = trainer?.total_training_steps ?? trainer?.total_steps ?? config?.total_steps;
  return typeof value === "number" ? value : undefined;
}

/**
 * A validation's headline number: the mean of its `val/<env>/mean_reward` entries, as the
 * trainer computes it (and picks best_actor by); for runs of other trainers, the mean of
 * any `val/...reward...` entry.
 */
function meanValidationReward(metrics: Record<string, number>): number {
  const entries = Object.entries(metrics);
  const perEnv = entries.filter(([k]) => /^val\/[^/]+\/mean_reward$/.test(k));
  const rewards = (perEnv.length > 0 ? perEnv : entries.filter(([k]) => /^val\/.*reward/.test(k))).map(([, v]) => v);
  return rewards.length === 0 ? Number.NaN : rewards.reduce((a, b) => a + b, 0) / rewards.length;
}

/** What metrics.jsonl held so far: records read, lines skipped and the first of those. */
export interface MetricsReadCounts {
  read: number;
  skipped: number;
  firstSkipped?: { line: number; problem: string };
}

export class RunDirReader {
  private runKind: RunKind;
  private opened = false;
  private metricsOffset = 0;
  /** Lines of metrics.jsonl consumed so far (1-based numbers of the next line = this + 1). */
  private metricsLines = 0;
  private partialLine = "";
  private counts: MetricsReadCounts = { read: 0, skipped: 0 };
  private totalSteps: number | undefined;
  /** The highest step metrics.jsonl has reported. */
  private lastStep: number | undefined;
  /** The newest resumable checkpoint seen (highest step), for the finished run's event. */
  private lastCheckpoint: { step: number; path: string } | undefined;
  private readonly seen = new Set<string>();
  /** Checkpoint folders reported so far (path -> its printable form). */
  private readonly checkpoints = new Map<string, string>();
  private evalFinished = false;
  private trainFinished = false;
  private isGone = false;
  /** Problems met while reading (a malformed line), reported once each as warnings. */
  private readonly problems = new Set<string>();
  /** Warnings met where no event list is at hand (an episode folder), sent with the poll. */
  private deferred: DashboardEvent[] = [];

  constructor(readonly dir: string) {
    if (!existsSync(dir) || !statSync(dir).isDirectory()) throw new Error(`${dir}: no such run directory`);
    this.runKind = detectRunKind(dir);
  }

  /** What the directory holds; "unknown" until a run has written something recognisable. */
  get kind(): RunKind {
    return this.runKind;
  }

  /** The directory was deleted or moved away while being watched; nothing more will come. */
  get gone(): boolean {
    return this.isGone;
  }

  /** How metrics.jsonl read so far: records, skipped lines, the first skipped one. */
  get metricsCounts(): MetricsReadCounts {
    return { ...this.counts };
  }

  /**
   * A message naming metrics.jsonl and its first bad line when the file has lines but not
   * one of them could be read (a run's metrics that show nothing are broken, not empty);
   * undefined otherwise.
   */
  unreadableMetrics(): string | undefined {
    const { read, skipped, firstSkipped } = this.counts;
    if (read > 0 || skipped === 0 || !firstSkipped) return undefined;
    return `${printable(join(this.dir, "metrics.jsonl"))}: no line is a metrics record (${skipped} line${skipped === 1 ? "" : "s"} skipped; line ${firstSkipped.line}: ${firstSkipped.problem})`;
  }

  /** Events for everything that appeared since the last call (everything, the first time). */
  poll(): DashboardEvent[] {
    if (this.isGone) return [];
    if (!this.stillThere()) return this.goneNow();
    const events: DashboardEvent[] = [];
    if (this.runKind === "unknown") {
      // Watching a directory before the run has written to it: look again each time.
      this.runKind = detectRunKind(this.dir);
      if (this.runKind !== "unknown") this.opened = false;
    }
    if (!this.opened) {
      this.opened = true;
      const config = readYaml(join(this.dir, "config.yaml"));
      this.totalSteps = totalStepsOf(config);
      events.push({ type: "run_dir_opened", kind: this.runKind, outputDir: printable(this.dir), totalSteps: this.totalSteps });
      if (this.runKind === "eval") events.push(this.evalStarted(config));
    }
    const read = (what: string, section: () => DashboardEvent[]) => this.guarded(events, what, section);
    if (this.runKind === "train") {
      read("metrics.jsonl", () => this.newMetrics());
      read("checkpoints/", () => this.newCheckpoints());
      read("rollouts/", () => this.newRolloutEpisodes());
      read("metrics.jsonl", () => this.trainEnd());
    } else if (this.runKind === "eval") {
      read("episode folders", () => this.newEvalEpisodes());
      read("summary.json", () => this.evalEnd());
    }
    events.push(...this.deferred.splice(0));
    // Deleted part-way through this poll: say so now rather than next time.
    if (!this.stillThere()) events.push(...this.goneNow());
    return events;
  }

  private stillThere(): boolean {
    try {
      return statSync(this.dir).isDirectory();
    } catch {
      return false;
    }
  }

  private goneNow(): DashboardEvent[] {
    this.isGone = true;
    return [
      {
        type: "warning",
        step: 0,
        code: "run_dir_gone",
        message: `the run directory ${printable(this.dir)} is gone (deleted or moved); nothing more will appear`,
      },
    ];
  }

  /**
   * Runs one part of a poll; a file that vanished or cannot be read (a race with the
   * writer, permissions) becomes a warning, never an exception out of the poll loop.
   */
  private guarded(events: DashboardEvent[], what: string, section: () => DashboardEvent[]): void {
    try {
      events.push(...section());
    } catch (err) {
      if (!this.stillThere()) return; // reported as gone by the caller
      this.problem(events, `${printable(join(this.dir, what))}: could not be read: ${printableLine((err as Error).message)}`);
    }
  }

  private evalStarted(config: Record<string, unknown> | undefined): DashboardEvent {
    const envs = config?.envs && typeof config.envs === "object" && !Array.isArray(config.envs) ? (config.envs as Record<string, unknown>) : {};
    const planned = Object.entries(envs).map(([tag, spec]) => {
      const episodes = spec && typeof spec === "object" ? (spec as { episodes?: unknown }).episodes : undefined;
      return { tag: printable(tag), planned: typeof episodes === "number" && Number.isFinite(episodes) ? episodes : 0 };
    });
    const model = config?.model as Record<string, unknown> | undefined;
    const name = model?.model_dir ?? model?.model;
    return { type: "eval_started", outputDir: printable(this.dir), model: typeof name === "string" ? printable(name) : undefined, envs: planned };
  }

  private newMetrics(): DashboardEvent[] {
    const path = join(this.dir, "metrics.jsonl");
    if (!existsSync(path)) return [];
    const size = statSync(path).size;
    if (size < this.metricsOffset) {
      // The file was replaced (a restarted run): read it again from the start.
      this.metricsOffset = 0;
      this.metricsLines = 0;
      this.partialLine = "";
      this.counts = { read: 0, skipped: 0 };
      this.lastStep = undefined;
    }
    if (size === this.metricsOffset) return [];
    const fd = openSync(path, "r");
    const buffer = Buffer.alloc(size - this.metricsOffset);
    try {
      readSync(fd, buffer, 0, buffer.length, this.metricsOffset);
    } finally {
      closeSync(fd);
    }
    this.metricsOffset = size;
    const text = this.partialLine + buffer.toString("utf8");
    const lines = text.split("\n");
    this.partialLine = lines.pop() ?? "";
    const events: DashboardEvent[] = [];
    for (const line of lines) {
      const number = ++this.metricsLines;
      if (line.trim() === "") continue;
      const parsed = parseMetricsLine(line);
      if ("problem" in parsed) {
        this.skippedLine(events, path, number, parsed.problem);
        continue;
      }
      this.counts.read++;
      const { record, step } = parsed;
      const metrics: Record<string, number> = {};
      for (const [key, value] of Object.entries(record)) {
        if (key !== "step" && key !== "__proto__" && typeof value === "number") metrics[printable(key)] = value;
      }
      events.push({ type: "metrics", step, metrics });
      const validation = Object.fromEntries(Object.entries(metrics).filter(([k]) => k.startsWith("val/")));
      if (Object.keys(validation).length > 0) events.push({ type: "validation", step, metrics: validation, meanReward: meanValidationReward(validation), best: false });
      this.lastStep = Math.max(this.lastStep ?? 0, step);
    }
    return events;
  }

  /** Counts a line that is not a metrics record; names the first few, then counts the rest. */
  private skippedLine(events: DashboardEvent[], path: string, line: number, problem: string): void {
    this.counts.skipped++;
    this.counts.firstSkipped ??= { line, problem };
    if (this.counts.skipped <= LINE_WARNINGS) {
      this.problem(events, `${printable(path)} line ${line}: skipped, ${problem}`);
    } else {
      // One message, so the dashboard shows it once with a count that grows.
      events.push({ type: "warning", step: 0, code: "run_dir", message: `${printable(path)}: more lines skipped that are not metrics records` });
    }
  }

  /** The run's last step is in metrics.jsonl: report the run as finished, once. */
  private trainEnd(): DashboardEvent[] {
    if (this.trainFinished || this.totalSteps === undefined || this.lastStep === undefined || this.lastStep < this.totalSteps) return [];
    this.trainFinished = true;
    return [{ type: "run_finished", step: this.lastStep, reason: "completed", ...(this.lastCheckpoint ? { checkpoint: this.lastCheckpoint.path } : {}) }];
  }

  private problem(events: DashboardEvent[], message: string): void {
    if (this.problems.has(message)) return;
    this.problems.add(message);
    events.push({ type: "warning", step: 0, code: "run_dir", message });
  }

  /**
   * Checkpoint folders that appeared since the last poll, and those reported before that
   * are gone (the trainer keeps only the newest `keep_checkpoints`).
   */
  private newCheckpoints(): DashboardEvent[] {
    const root = join(this.dir, "checkpoints");
    const events: DashboardEvent[] = [];
    const names = listDirs(root).sort();
    const present = new Set(names.map((name) => join(root, name)));
    for (const [path, shown] of this.checkpoints) {
      if (present.has(path)) continue;
      this.checkpoints.delete(path);
      events.push({ type: "checkpoint_removed", path: shown });
    }
    for (const name of names) {
      const path = join(root, name);
      if (this.checkpoints.has(path)) continue;
      const step = stepOf(name);
      const bestActor = name.includes("best");
      if (step === undefined && !bestActor) continue;
      this.checkpoints.set(path, printable(path));
      events.push({ type: "checkpoint_saved", step: step ?? 0, path: printable(path), seconds: 0, bestActor });
    }
    // The newest resumable one, for the finished run's event.
    const resumable = [...this.checkpoints].flatMap(([path, shown]) => {
      const name = path.slice(root.length + 1);
      const step = stepOf(name);
      return step !== undefined && !name.includes("best") ? [{ step, path: shown }] : [];
    });
    this.lastCheckpoint = resumable.sort((a, b) => a.step - b.step).pop();
    return events;
  }

  private newRolloutEpisodes(): DashboardEvent[] {
    const root = join(this.dir, "rollouts");
    const steps = listDirs(root)
      .map((name) => ({ name, step: stepOf(name) }))
      .filter((s): s is { name: string; step: number } => s.step !== undefined)
      .sort((a, b) => a.step - b.step)
      .slice(-ROLLOUT_STEPS_LOADED);
    return steps.flatMap(({ name, step }) => {
      const stepDir = join(root, name);
      // The trainer's flat folders first, then any in eval's <tag>/seed_<S> layout.
      const flat = listDirs(stepDir)
        .filter((child) => existsSync(join(stepDir, child, "metrics.json")))
        .sort()
        .flatMap((child) => this.newEpisode(join(stepDir, child), `step ${step} ${child}`, step));
      return [...flat, ...this.newEpisodesUnder(stepDir, step)].map((e) => e.loaded);
    });
  }

  /** The episode in `dir` if it is finished and was not reported before. */
  private newEpisode(dir: string, id: string, step?: number): { outcome: DashboardEvent; loaded: DashboardEvent }[] {
    if (this.seen.has(dir)) return [];
    const episode = loadEpisode(dir, step, printable(id));
    if (!episode) {
      // Not finished yet, or its metrics.json is no episode's (outputs are renamed into
      // place whole, so a file that is there but unreadable stays so).
      if (existsSync(join(dir, "metrics.json"))) this.problem(this.deferred, `${printable(join(dir, "metrics.json"))}: skipped, not an episode's metrics (expected a JSON object)`);
      return [];
    }
    this.seen.add(dir);
    const outcome = {
      tag: episode.tag,
      seed: episode.seed,
      success: episode.success,
      cumulative_reward: episode.reward,
      num_turns: episode.turns.length,
      finish_reason: episode.finishReason,
      error: episode.error === undefined ? undefined : { message: episode.error },
    };
    return [{ outcome: { type: "eval_episode", outcome }, loaded: { type: "episode_loaded", episode } }];
  }

  private newEvalEpisodes(): DashboardEvent[] {
    return this.newEpisodesUnder(this.dir).flatMap((e) => [e.outcome, e.loaded]);
  }

  /** Finished episode folders `<root>/<tag>/seed_<S>/` not reported before. */
  private newEpisodesUnder(root: string, step?: number): { outcome: DashboardEvent; loaded: DashboardEvent }[] {
    const found: { outcome: DashboardEvent; loaded: DashboardEvent }[] = [];
    for (const tag of listDirs(root).sort()) {
      const seeds = listDirs(join(root, tag))
        .map((name) => ({ name, seed: seedOf(name) }))
        .filter((s): s is { name: string; seed: number } => s.seed !== undefined)
        .sort((a, b) => a.seed - b.seed);
      for (const { name } of seeds) {
        const id = step === undefined ? `${tag}/${name}` : `step ${step} ${tag}/${name}`;
        found.push(...this.newEpisode(join(root, tag, name), id, step));
      }
    }
    return found;
  }

  private evalEnd(): DashboardEvent[] {
    if (this.evalFinished) return [];
    try {
      const summary = JSON.parse(readFileSync(join(this.dir, "summary.json"), "utf8")) as { complete?: boolean };
      if (summary.complete !== true) return [];
    } catch {
      return [];
    }
    this.evalFinished = true;
    return [{ type: "eval_finished" }];
  }
}
