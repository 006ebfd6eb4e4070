import { expect, test } from "bun:test";
import { join } from "node:path";
import type { EvalEvent, EvalProgress } from "../../src/evaluation/events.ts";
import { evalEventAdapter } from "../../src/tui/eval-adapter.ts";
import type { DashboardEvent } from "../../src/tui/events.ts";
import { initialState, reduce } from "../../src/tui/state.ts";

const EVAL = join(import.meta.dir, "..", "fixtures", "run-dir", "eval");
const progress = (done: number, running: number): EvalProgress => ({ done, total: 4, running, successes: 0, errors: 0 });

test("eval runner events become dashboard events; finished and resumed episodes are read from their folders", () => {
  const events: DashboardEvent[] = [];
  const planned = [0, 1].flatMap((seed) => ["sokoban_vision", "frozenlake_text"].map((tag) => ({ tag, dir: join(EVAL, tag, `seed_${seed}`) })));
  const listen = evalEventAdapter((e) => events.push(e), planned);
  const runStarted: EvalEvent = {
    type: "run_started",
    outputDir: EVAL,
    model: "engine:qwen2_5_vl_tiny",
    maxConcurrentEpisodes: 2,
    envs: [
      { tag: "sokoban_vision", envName: "Sokoban", harness: "concat", maxTurns: 2, episodes: 2, skipped: 1 },
      { tag: "frozenlake_text", envName: "FrozenLake", harness: "no_concat", maxTurns: 2, episodes: 2, skipped: 0 },
    ],
    progress: progress(1, 0),
  };
  listen(runStarted);
  listen({ type: "episode_started", tag: "frozenlake_text", envName: "FrozenLake", seed: 0, dir: join(EVAL, "frozenlake_text", "seed_0"), progress: progress(1, 1) });
  const pixels = { width: 1, height: 2, data: new Uint8Array([1, 2, 3, 4, 5, 6]) };
  listen({
    type: "turn_finished",
    tag: "frozenlake_text",
    seed: 0,
    turn: 1,
    maxTurns: 2,
    text: "<think>left is safe</think><answer>Left</answer>",
    completionFinishReason: "stop",
    action: { actions: ["left"], formatCorrect: true },
    reward: { total: 0.05, worldModel: { state_estimation: 0.03 }, env: 0.02 },
    done: false,
    observationText: "after the move",
    images: [{ path: "images/obs_01_0.png", width: 1, height: 2, image: pixels }],
  });
  // While it runs, the viewer has it turn by turn, pixels and all.
  const live = events.reduce((s, e) => reduce(s, e, 0), initialState()).episodes.find((e) => e.id === "frozenlake_text/seed_0")!;
  expect(live.running).toBe(true);
  expect(live.turns).toHaveLength(1);
  expect(live.turns[0]).toMatchObject({ index: 1, actions: ["left"], formatCorrect: true, reward: 0.05, observationText: "after the move", images: [pixels] });
  expect(live.turns[0]!.rewardSplit).toEqual({ env: 0.02, worldModel: 0.03 });
  expect(live.turns[0]!.parts.map((p) => p.kind)).toEqual(["think", "answer"]);
  listen({
    type: "episode_finished",
    tag: "frozenlake_text",
    envName: "FrozenLake",
    seed: 0,
    dir: join(EVAL, "frozenlake_text", "seed_0"),
    success: false,
    reward: 0,
    turns: 2,
    finishReason: "model_error",
    error: { kind: "model_error", message: "HTTP 503" },
    progress: progress(2, 0),
  });
  listen({ type: "warning", code: "retry", message: "retry 1 in 0.50 s after: HTTP 503" });

  expect(events.map((e) => e.type)).toEqual([
    "eval_started",
    // The one skipped sokoban episode, read from disk.
    "eval_episode",
    "episode_loaded",
    "note",
    "eval_running",
    // The running episode, then again after its turn.
    "episode_loaded",
    "episode_loaded",
    "eval_running",
    "eval_episode",
    "episode_loaded",
    "warning",
  ]);
  const state = events.reduce((s, e) => reduce(s, e, 0), initialState());
  expect(state.evalEnvs.map((e) => [e.tag, e.done, e.planned, e.errors])).toEqual([
    ["sokoban_vision", 1, 2, 0],
    ["frozenlake_text", 1, 2, 1],
  ]);
  // The finished episode, read from its folder, took the running one's place.
  expect(state.episodes.map((e) => [e.id, e.running])).toEqual([
    ["sokoban_vision/seed_0", undefined],
    ["frozenlake_text/seed_0", undefined],
  ]);
  expect(state.failures).toEqual([{ tag: "frozenlake_text", seed: 0, reason: "model_error", message: "HTTP 503" }]);
  expect(state.warnings[0]).toMatchObject({ code: "retry", message: "retry 1 in 0.50 s after: HTTP 503" });
  expect(state.notes).toEqual(["resume: 1 episode(s) already finished"]);
});
