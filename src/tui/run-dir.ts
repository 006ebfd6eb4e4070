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
 * still being written waits for its newline), episode folders once each (they appear
 * whole: outputs are renamed into place).
 */
import { closeSync, existsSync, openSync, readFileSync, readSync, readdirSync, statSync } from "node:fs";
import { join } from "node:path";
import { parse as parseYaml } from "yaml";
import type { DashboardEvent } from "./events.ts";
import { loadEpisode } from "./episode.ts";

export type RunKind = "train" | "eval" | "unknown";

/** Rollout steps whose episodes are loaded for the viewer (the newest ones). */
const ROLLOUT_STEPS_LOADED = 2;

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

/** Mean of the `val/<env>/reward`-like entries: what a validation's headline number is. */
function meanValidationReward(metrics: Record<string, number>): number {
  const rewards = Object.entries(metrics).filter(([k]) => /^val\/.*reward/.test(k)).map(([, v]) => v);
  return rewards.length === 0 ? Number.NaN : rewards.reduce((a, b) => a + b, 0) / rewards.length;
}

export class RunDirReader {
  private runKind: RunKind;
  private opened = false;
  private metricsOffset = 0;
  private partialLine = "";
  private readonly seen = new Set<string>();
  private evalFinished = false;
  /** Problems met while reading (a malformed line), reported once each as warnings. */
  private readonly problems = new Set<string>();

  constructor(readonly dir: string) {
    if (!existsSync(dir) || !statSync(dir).isDirectory()) throw new Error(`${dir}: no such run directory`);
    this.runKind = detectRunKind(dir);
  }

  /** What the directory holds; "unknown" until a run has written something recognisable. */
  get kind(): RunKind {
    return this.runKind;
  }

  /** Events for everything that appeared since the last call (everything, the first time). */
  poll(): DashboardEvent[] {
    const events: DashboardEvent[] = [];
    if (this.runKind === "unknown") {
      // Watching a directory before the run has written to it: look again each time.
      this.runKind = detectRunKind(this.dir);
      if (this.runKind !== "unknown") this.opened = false;
    }
    if (!this.opened) {
      this.opened = true;
      const config = readYaml(join(this.dir, "config.yaml"));
      events.push({ type: "run_dir_opened", kind: this.runKind, outputDir: this.dir, totalSteps: totalStepsOf(config) });
      if (this.runKind === "eval") events.push(this.evalStarted(config));
    }
    if (this.runKind === "train") {
      events.push(...this.newMetrics(), ...this.newCheckpoints(), ...this.newRolloutEpisodes());
    } else if (this.runKind === "eval") {
      events.push(...this.newEvalEpisodes(), ...this.evalEnd());
    }
    return events;
  }

  private evalStarted(config: Record<string, unknown> | undefined): DashboardEvent {
    const envs = (config?.envs ?? {}) as Record<string, { episodes?: unknown }>;
    const planned = Object.entries(envs).map(([tag, spec]) => ({ tag, planned: typeof spec?.episodes === "number" ? spec.episodes : 0 }));
    const model = config?.model as Record<string, unknown> | undefined;
    const name = model?.model_dir ?? model?.model;
    return { type: "eval_started", outputDir: this.dir, model: typeof name === "string" ? name : undefined, envs: planned };
  }

  private newMetrics(): DashboardEvent[] {
    const path = join(this.dir, "metrics.jsonl");
    if (!existsSync(path)) return [];
    const size = statSync(path).size;
    if (size < this.metricsOffset) {
      // The file was replaced (a restarted run): read it again from the start.
      this.metricsOffset = 0;
      this.partialLine = "";
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
    lines.forEach((line) => {
      if (line.trim() === "") return;
      let record: Record<string, unknown>;
      try {
        record = JSON.parse(line) as Record<string, unknown>;
      } catch {
        this.problem(events, `metrics.jsonl: a line is not JSON: ${line.slice(0, 60)}`);
        return;
      }
      const step = record.step;
      if (typeof step !== "number") {
        this.problem(events, `metrics.jsonl: a line has no numeric "step"`);
        return;
      }
      const metrics: Record<string, number> = {};
      for (const [key, value] of Object.entries(record)) if (key !== "step" && typeof value === "number") metrics[key] = value;
      events.push({ type: "metrics", step, metrics });
      const validation = Object.fromEntries(Object.entries(metrics).filter(([k]) => k.startsWith("val/")));
      if (Object.keys(validation).length > 0) events.push({ type: "validation", step, metrics: validation, meanReward: meanValidationReward(validation), best: false });
    });
    return events;
  }

  private problem(events: DashboardEvent[], message: string): void {
    if (this.problems.has(message)) return;
    this.problems.add(message);
    events.push({ type: "warning", step: 0, code: "run_dir", message });
  }

  private newCheckpoints(): DashboardEvent[] {
    const root = join(this.dir, "checkpoints");
    const events: DashboardEvent[] = [];
    for (const name of listDirs(root).sort()) {
      const path = join(root, name);
      if (this.seen.has(path)) continue;
      const step = stepOf(name);
      const bestActor = name.includes("best");
      if (step === undefined && !bestActor) continue;
      this.seen.add(path);
      events.push({ type: "checkpoint_saved", step: step ?? 0, path, seconds: 0, bestActor });
    }
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
    const episode = loadEpisode(dir, step, id);
    if (!episode) return []; // not finished yet
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
