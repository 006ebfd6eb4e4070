import { describe, expect, test } from "bun:test";
import type { DashboardEvent } from "../../src/tui/events.ts";
import { type DashboardState, initialState, latest, reduce, stepEta } from "../../src/tui/state.ts";

/** Fold events given as [time in seconds, event]. */
function fold(events: [number, DashboardEvent][], from: DashboardState = initialState(0)): DashboardState {
  return events.reduce((s, [t, e]) => reduce(s, e, t * 1000), from);
}

const runStarted: DashboardEvent = {
  type: "run_started",
  outputDir: "runs/x",
  startStep: 0,
  totalSteps: 4,
  estimator: "gae",
  useCritic: true,
  envs: ["sokoban"],
  device: "cpu",
  dtype: "float32",
};

describe("train events", () => {
  test("phase progress gives units per second since the phase started", () => {
    const s = fold([
      [0, runStarted],
      [0, { type: "step_started", step: 1, totalSteps: 4 }],
      [10, { type: "phase_started", step: 1, phase: "rollout", total: 8 }],
      [14, { type: "phase_progress", step: 1, phase: "rollout", done: 2 }],
    ]);
    expect(s.kind).toBe("train");
    // 2 episodes in 4 s; the total comes from phase_started.
    expect(s.phase).toEqual({ step: 1, name: "rollout", done: 2, total: 8, startedAt: 10_000, rate: 0.5 });
  });

  test("metrics build one series per key; a repeated step replaces its value", () => {
    const s = fold([
      [0, { type: "metrics", step: 1, metrics: { "actor/entropy": 2 } }],
      [1, { type: "metrics", step: 2, metrics: { "actor/entropy": 1.5, "critic/score/mean": 0.1 } }],
      [2, { type: "metrics", step: 2, metrics: { "actor/entropy": 1.4 } }],
    ]);
    expect(s.series["actor/entropy"]).toEqual({ steps: [1, 2], values: [2, 1.4] });
    expect(s.series["critic/score/mean"]).toEqual({ steps: [2], values: [0.1] });
    expect(latest(s, "actor/entropy")).toBe(1.4);
    expect(s.step).toBe(2);
  });

  test("ETA: the mean step time times the steps left", () => {
    const s = fold([
      [0, runStarted],
      [30, { type: "step_finished", step: 1, totalSteps: 4, seconds: 30 }],
      [80, { type: "step_finished", step: 2, totalSteps: 4, seconds: 50 }],
    ]);
    // Mean 40 s, 2 steps left.
    expect(stepEta(s)).toBe(80);
  });

  test("a repeated warning is counted, not listed again", () => {
    const warn = (message: string): DashboardEvent => ({ type: "warning", step: 3, code: "truncation", message });
    const s = fold([
      [0, warn("response truncated")],
      [1, warn("judge failed")],
      [2, warn("response truncated")],
    ]);
    expect(s.warnings.map((w) => [w.message, w.count])).toEqual([
      ["judge failed", 1],
      ["response truncated", 2],
    ]);
  });

  test("rollout episodes of the current step are counted; an episode error becomes a warning", () => {
    const episode = (success: boolean, error?: string): DashboardEvent => ({
      type: "episode_finished", step: 1, split: "train", env: "sokoban", episodeId: "e", seed: 3, reward: success ? 1 : 0, success, turns: 2, error,
    });
    const s = fold([
      [0, { type: "step_started", step: 1, totalSteps: 4 }],
      [1, episode(true)],
      [2, episode(false, "model_error: timeout")],
      [3, { type: "episode_finished", step: 1, split: "val", env: "sokoban", episodeId: "v", seed: 1, reward: 1, success: true, turns: 1 }],
    ]);
    expect(s.rolloutEpisodes).toEqual({ step: 1, done: 2, successes: 1, rewardSum: 1 });
    expect(s.warnings[0]!.message).toBe("sokoban seed 3: model_error: timeout");
  });

  test("checkpoints, validation and the end of the run", () => {
    const s = fold([
      [0, { type: "validation", step: 2, metrics: { "val/sokoban/success_rate": 0.5 }, meanReward: 0.7, best: true }],
      [1, { type: "checkpoint_saved", step: 2, path: "ckpt/global_step_2", seconds: 3, bestActor: false }],
      [2, { type: "run_finished", step: 2, reason: "interrupted", checkpoint: "ckpt/global_step_2" }],
    ]);
    expect(s.validation).toEqual({ step: 2, metrics: { "val/sokoban/success_rate": 0.5 }, meanReward: 0.7, best: true });
    expect(s.checkpoints).toEqual([{ step: 2, path: "ckpt/global_step_2", bestActor: false }]);
    expect(s.finished).toEqual({ reason: "interrupted", error: undefined, checkpoint: "ckpt/global_step_2" });
  });
});

describe("eval events", () => {
  test("per-env progress, running success and reward, failures", () => {
    const outcome = (tag: string, seed: number, success: boolean, reward: number, finish_reason: "done" | "model_error" = "done") =>
      ({ type: "eval_episode", outcome: { tag, seed, success, cumulative_reward: reward, num_turns: 2, finish_reason, error: finish_reason === "done" ? undefined : { message: "HTTP 500" } } }) as DashboardEvent;
    const s = fold([
      [0, { type: "eval_started", outputDir: "runs/eval", envs: [{ tag: "sokoban", planned: 4 }, { tag: "frozenlake", planned: 2 }] }],
      [1, outcome("sokoban", 0, true, 1.1)],
      [2, outcome("sokoban", 1, false, 0.1)],
      [3, outcome("frozenlake", 0, false, 0, "model_error")],
    ]);
    expect(s.kind).toBe("eval");
    expect(s.evalEnvs).toEqual([
      { tag: "sokoban", planned: 4, done: 2, successes: 1, errors: 0, rewardSum: 1.2000000000000002 },
      { tag: "frozenlake", planned: 2, done: 1, successes: 0, errors: 1, rewardSum: 0 },
    ]);
    expect(s.failures).toEqual([{ tag: "frozenlake", seed: 0, reason: "model_error", message: "HTTP 500" }]);
  });

  test("the viewer keeps one entry per id; an episode loaded again keeps its place", () => {
    const ep = (id: string, reward: number): DashboardEvent => ({
      type: "episode_loaded",
      episode: { id, tag: "t", seed: 0, success: false, reward, finishReason: "done", initialText: "", initialImages: [], turns: [] },
    });
    const s = fold([[0, ep("a", 0)], [1, ep("b", 0)], [2, ep("a", 5)]]);
    expect(s.episodes.map((e) => [e.id, e.reward])).toEqual([["a", 5], ["b", 0]]);
  });
});
