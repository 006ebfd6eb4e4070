import { afterEach, describe, expect, test } from "bun:test";
import { appendFileSync, cpSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { loadEpisode } from "../../src/tui/episode.ts";
import type { DashboardEvent } from "../../src/tui/events.ts";
import { RunDirReader, detectRunKind } from "../../src/tui/run-dir.ts";
import { initialState, reduce } from "../../src/tui/state.ts";

const FIXTURE = join(import.meta.dir, "..", "fixtures", "run-dir");
const temporaries: string[] = [];
afterEach(() => {
  for (const dir of temporaries.splice(0)) rmSync(dir, { recursive: true, force: true });
});

function copyOf(name: string): string {
  const dir = mkdtempSync(join(tmpdir(), "vagen-monitor-"));
  temporaries.push(dir);
  cpSync(join(FIXTURE, name), dir, { recursive: true });
  return dir;
}

const typesOf = (events: DashboardEvent[]) => events.map((e) => e.type);

describe("training run directory", () => {
  test("metrics, validations, checkpoints and the newest two steps' rollouts", () => {
    const reader = new RunDirReader(join(FIXTURE, "train"));
    expect(reader.kind).toBe("train");
    const events = reader.poll();
    expect(events[0]).toEqual({ type: "run_dir_opened", kind: "train", outputDir: join(FIXTURE, "train"), totalSteps: 10 });
    const metrics = events.filter((e) => e.type === "metrics");
    expect(metrics.map((e) => e.step)).toEqual([1, 2, 3, 4, 5, 6]);
    expect(metrics[0]!.metrics["actor/pg_loss"]).toBe(-0.04);
    const validations = events.filter((e) => e.type === "validation");
    expect(validations.map((v) => v.step)).toEqual([3, 6]);
    // Mean of val/sokoban_vision/reward 0.3 and val/frozenlake_text/reward 0.6.
    expect(validations[1]!.meanReward).toBeCloseTo(0.45, 10);
    expect(events.filter((e) => e.type === "checkpoint_saved").map((e) => e.step)).toEqual([3, 6]);
    const episodes = events.flatMap((e) => (e.type === "episode_loaded" ? [e.episode] : []));
    // step_1 is older than the two newest rollout steps (5 and 6), so it is not loaded.
    expect(episodes.map((e) => e.id)).toEqual([
      "step 5 000_sokoban_vision_seed0_traj0",
      "step 5 001_frozenlake_text_seed1_traj0",
      "step 6 000_sokoban_vision_seed0_traj0",
      "step 6 001_frozenlake_text_seed1_traj0",
    ]);
    expect(episodes.map((e) => [e.tag, e.seed, e.step])).toEqual([
      ["sokoban_vision", 0, 5],
      ["frozenlake_text", 1, 5],
      ["sokoban_vision", 0, 6],
      ["frozenlake_text", 1, 6],
    ]);
    // Nothing new: nothing reported twice.
    expect(reader.poll()).toEqual([]);
  });

  test("follows metrics.jsonl as it grows, waiting for a line's newline", () => {
    const dir = copyOf("train");
    const reader = new RunDirReader(dir);
    reader.poll();
    appendFileSync(join(dir, "metrics.jsonl"), '{"step": 7, "actor/entropy": 1.3');
    expect(reader.poll()).toEqual([]);
    appendFileSync(join(dir, "metrics.jsonl"), ', "critic/score/mean": 0.7}\nnot json\n');
    const events = reader.poll();
    expect(events[0]).toEqual({ type: "metrics", step: 7, metrics: { "actor/entropy": 1.3, "critic/score/mean": 0.7 } });
    // The fixture's 6 lines, then step 7's: the junk is line 8.
    expect(events[1]).toMatchObject({ type: "warning", code: "run_dir", message: `${join(dir, "metrics.jsonl")} line 8: skipped, not JSON: not json` });
  });

  test("new rollout steps and checkpoints show up on the next poll", () => {
    const dir = copyOf("train");
    const reader = new RunDirReader(dir);
    reader.poll();
    cpSync(join(dir, "rollouts", "step_6"), join(dir, "rollouts", "step_7"), { recursive: true });
    cpSync(join(dir, "checkpoints", "step_6"), join(dir, "checkpoints", "step_7"), { recursive: true });
    // A checkpoint still being written has a temporary name and is not reported.
    cpSync(join(dir, "checkpoints", "step_6"), join(dir, "checkpoints", ".tmp-step_8-123"), { recursive: true });
    const events = reader.poll();
    expect(typesOf(events)).toEqual(["checkpoint_saved", "episode_loaded", "episode_loaded"]);
    expect(events[0]).toMatchObject({ step: 7, path: join(dir, "checkpoints", "step_7"), bestActor: false });
    expect(events.flatMap((e) => (e.type === "episode_loaded" ? [e.episode.step] : []))).toEqual([7, 7]);
  });

  test("rollouts in eval's <tag>/seed_<S> layout are read too", () => {
    const dir = copyOf("train");
    const reader = new RunDirReader(dir);
    reader.poll();
    cpSync(join(FIXTURE, "eval", "sokoban_vision", "seed_1"), join(dir, "rollouts", "step_8", "sokoban_vision", "seed_1"), { recursive: true });
    const loaded = reader.poll().flatMap((e) => (e.type === "episode_loaded" ? [e.episode] : []));
    expect(loaded.map((e) => [e.id, e.step, e.turns.length])).toEqual([["step 8 sokoban_vision/seed_1", 8, 2]]);
  });
});

describe("eval run directory", () => {
  test("planned episodes from config.yaml, each finished episode once, the end from summary.json", () => {
    const reader = new RunDirReader(join(FIXTURE, "eval"));
    expect(reader.kind).toBe("eval");
    const events = reader.poll();
    expect(events[1]).toEqual({
      type: "eval_started",
      outputDir: join(FIXTURE, "eval"),
      model: "../../qwen2_5_vl_tiny",
      envs: [
        { tag: "sokoban_vision", planned: 2 },
        { tag: "frozenlake_text", planned: 2 },
      ],
    });
    const state = events.reduce((s, e) => reduce(s, e, 0), initialState());
    expect(state.evalEnvs.map((e) => [e.tag, e.done, e.planned, e.successes])).toEqual([
      ["sokoban_vision", 2, 2, 0],
      ["frozenlake_text", 2, 2, 0],
    ]);
    expect(state.episodes).toHaveLength(4);
    expect(typesOf(events).at(-1)).toBe("eval_finished");
    expect(reader.poll()).toEqual([]);
  });

  test("an episode still being written (no metrics.json) is not reported until it is whole", () => {
    const dir = copyOf("eval");
    rmSync(join(dir, "summary.json"));
    rmSync(join(dir, "frozenlake_text", "seed_1", "metrics.json"));
    const reader = new RunDirReader(dir);
    const first = reader.poll();
    expect(first.filter((e) => e.type === "eval_episode")).toHaveLength(3);
    cpSync(join(FIXTURE, "eval", "frozenlake_text", "seed_1", "metrics.json"), join(dir, "frozenlake_text", "seed_1", "metrics.json"));
    expect(typesOf(reader.poll())).toEqual(["eval_episode", "episode_loaded"]);
  });

  test("kind detection and a missing directory", () => {
    expect(detectRunKind(tmpdir())).toBe("unknown");
    expect(() => new RunDirReader(join(FIXTURE, "nope"))).toThrow("no such run directory");
  });
});

describe("episode folders", () => {
  test("turns with parts, actions and the reward split", () => {
    const dir = join(FIXTURE, "train", "rollouts", "step_6", "000_sokoban_vision_seed0_traj0");
    const episode = loadEpisode(dir, 6)!;
    expect(episode.turns).toHaveLength(2);
    const turn = episode.turns[0]!;
    expect(turn.parts.map((p) => p.kind)).toEqual(["perception", "think", "prediction", "answer"]);
    expect(turn.actions).toEqual(["down"]);
    expect(turn.formatCorrect).toBe(true);
    // 0.13 = world-model 0.02 + 0.01, the rest from the env.
    expect(turn.rewardSplit.worldModel).toBeCloseTo(0.03, 10);
    expect(turn.rewardSplit.env).toBeCloseTo(0.1, 10);
    expect(turn.rewardSplit.format).toBeUndefined();
    expect(turn.images).toEqual([join(dir, "images", "obs_01_0.png")]);
    expect(episode.initialImages).toEqual([join(dir, "images", "obs_00_0.png")]);
  });

  test("a text-only recorded eval episode", () => {
    const episode = loadEpisode(join(FIXTURE, "eval", "frozenlake_text", "seed_0"))!;
    expect(episode.id).toBe("frozenlake_text/seed_0");
    expect(episode.initialText).toContain("[Initial Observation]");
    expect(episode.turns.map((t) => t.index)).toEqual([1, 2]);
    expect(episode.turns[0]!.images).toEqual([]);
  });
});

describe("watching before the run starts", () => {
  test("an empty directory is read again until a run shows up in it", () => {
    const dir = mkdtempSync(join(tmpdir(), "vagen-monitor-"));
    temporaries.push(dir);
    const reader = new RunDirReader(dir);
    expect(reader.poll()).toEqual([{ type: "run_dir_opened", kind: "unknown", outputDir: dir, totalSteps: undefined }]);
    expect(reader.poll()).toEqual([]);
    appendFileSync(join(dir, "metrics.jsonl"), '{"step": 1, "actor/entropy": 2}\n');
    expect(reader.poll()).toEqual([
      { type: "run_dir_opened", kind: "train", outputDir: dir, totalSteps: undefined },
      { type: "metrics", step: 1, metrics: { "actor/entropy": 2 } },
    ]);
    expect(reader.kind).toBe("train");
  });
});
