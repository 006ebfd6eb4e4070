/**
 * Level generation is bounded (a config that cannot be met ends in an error naming it),
 * cooperative (the event loop keeps running while a level is built), and gives the same
 * levels as before; episodes that are over stay over.
 */
import { describe, expect, test } from "bun:test";
import { finishCooperatively, finishNow, type Work } from "../../envs/_common/cooperative.ts";
import { Rng } from "../../src/core/rng.ts";
import { FrozenLakeEnv } from "../../envs/frozenlake/env.ts";
import { generateRandomMap } from "../../envs/frozenlake/map.ts";
import { SokobanEnv } from "../../envs/sokoban/env.ts";
import { generateLevel, generateRoom, levelWork } from "../../envs/sokoban/generate.ts";
import { shortestSolution } from "../../envs/sokoban/solver.ts";
import { VagenError } from "../../src/core/errors.ts";

const answer = (actions: string) => `<think>x</think><answer>${actions}</answer>`;

/** Counts event-loop turns (setImmediate callbacks) until `promise` settles. */
async function turnsWhile(promise: Promise<unknown>): Promise<number> {
  let turns = 0;
  let settled = false;
  const tick = () => {
    if (settled) return;
    turns++;
    setImmediate(tick);
  };
  setImmediate(tick);
  await promise.finally(() => (settled = true)).catch(() => undefined);
  return turns;
}

describe("cooperative work", () => {
  function* countTo(n: number): Work<number> {
    let total = 0;
    for (let i = 1; i <= n; i++) {
      total += i;
      yield;
    }
    return total;
  }

  test("runs to the same result straight through or in slices", async () => {
    expect(finishNow(countTo(1000))).toBe(500500);
    expect(await finishCooperatively(countTo(1000), { sliceMs: 0 })).toBe(500500);
  });

  test("hands the event loop back between slices and stops on abort", async () => {
    expect(await turnsWhile(finishCooperatively(countTo(50), { sliceMs: 0 }))).toBeGreaterThan(10);
    const controller = new AbortController();
    controller.abort(new Error("stop"));
    await expect(finishCooperatively(countTo(10), { signal: controller.signal })).rejects.toThrow("stop");
  });
});

describe("Sokoban generation limits", () => {
  test("a room too small for any level: error names the config and reset_seed_max_tries", async () => {
    const env = new SokobanEnv({ dim_room: [4, 4], num_boxes: 1, reset_seed_max_tries: 40 });
    const err = await env.reset(1).catch((e) => e);
    expect(err).toBeInstanceOf(VagenError);
    expect(err.message).toStartWith("Sokoban: could not generate a level with dim_room=[4,4], num_boxes=1 in 40 tries");
    expect(err.message).toContain("(reset_seed_max_tries=40)");
  });

  test("the state budget stops a search that cannot succeed, naming max_generation_states", async () => {
    // Seed 3's first 8x8 room with six boxes fails reverse play (see the next test).
    expect(() => generateRoom(new Rng(3), { height: 8, width: 8, numBoxes: 6 })).toThrow(/reverse play found no state/);
    const env = new SokobanEnv({ dim_room: [8, 8], num_boxes: 6, max_generation_states: 1 });
    const err = await env.reset(3).catch((e) => e);
    expect(err).toBeInstanceOf(VagenError);
    expect(err.message).toMatch(/^Sokoban: could not generate a level with dim_room=\[8,8\], num_boxes=6 in 1 tries, \d+ states searched \(max_generation_states=1\); last failure: reverse play found no state/);
    expect(err.hint).toContain("fewer boxes");
  });

  test("within the budget the same config works, and a room that misses the range is the fallback", async () => {
    const env = new SokobanEnv({ dim_room: [8, 8], num_boxes: 6, prompt_format: "free_think" });
    expect((await env.reset(3)).obs.text).toContain("[Initial Observation]");
    // An unreachable solution range with a tiny budget: the last candidate is used, flagged.
    const filtered = new SokobanEnv({ min_solution_steps: [150, 160], max_generation_states: 1 });
    const { info } = await filtered.reset(0);
    expect(info.level_filter_failed).toBe(true);
  });

  test("the BFS state cap makes a candidate unsolved instead of searching on", () => {
    const room = generateRoom(new Rng(0), { height: 6, width: 6, numBoxes: 1 });
    expect(shortestSolution(room, 200)).not.toBeNull();
    expect(shortestSolution(room, 200, 1)).toBeNull();
  });

  test("levels are unchanged: pinned seeds, and cooperative runs equal straight ones", async () => {
    const options = { height: 7, width: 7, numBoxes: 2, solutionRange: [2, 12] as [number, number], maxTries: 10000, bfsMaxDepth: 100 };
    for (let seed = 0; seed < 10; seed++) {
      const straight = generateLevel(seed, options);
      const sliced = await finishCooperatively(levelWork(seed, options), { sliceMs: 0 });
      expect(Buffer.from(sliced.room.state)).toEqual(Buffer.from(straight.room.state));
      expect(sliced.seedUsed).toBe(straight.seedUsed);
    }
    // Seed 0's default room, as test/envs/sokoban.test.ts pins it.
    const { obs } = await new SokobanEnv({ prompt_format: "free_think" }).reset(0);
    expect(obs.text).toContain(" #  #  _  P  _  # \n #  _  _  X  #  # \n #  O  _  _  _  # ");
  });

  test("the event loop keeps turning while a big level is generated", async () => {
    const env = new SokobanEnv({ dim_room: [16, 16], num_boxes: 3 });
    expect(await turnsWhile(env.reset(0))).toBeGreaterThan(2);
  });
});

describe("FrozenLake generation limits", () => {
  test("maps are unchanged, also for tiny p on a big board", async () => {
    expect(generateRandomMap(4, 0.8, 0)).toEqual(["HHGS", "FFFH", "FFHF", "HFFF"]);
    const env = new FrozenLakeEnv({ size: 12, p: 0 });
    const { info } = await env.reset(5);
    expect(info.map).toEqual(generateRandomMap(12, 0, 5));
    expect(info.optimal_solution_length).toBe(1); // with no ice, start and goal must touch
  });

  test("a board that needs more draws than max_generation_attempts: error names it", async () => {
    const env = new FrozenLakeEnv({ size: 64, p: 0, max_generation_attempts: 3 });
    const err = await env.reset(0).catch((e) => e);
    expect(err).toBeInstanceOf(VagenError);
    expect(err.message).toBe("FrozenLake: could not generate a map with size=64, p=0 in 3 boards (max_generation_attempts): no path joined start and goal");
  });
});

describe("steps after the episode is over", () => {
  test("FrozenLake at the goal: the next steps pay nothing and stay done", async () => {
    const env = new FrozenLakeEnv({ desc: ["SFG"], prompt_format: "free_think" });
    await env.reset(0);
    const reached = await env.step(answer("Right, Right"));
    expect([reached.reward, reached.done, reached.info.success]).toEqual([1.02, true, true]);
    for (let i = 0; i < 3; i++) {
      const again = await env.step(answer("Left"));
      expect([again.reward, again.done, again.info.success, again.info.after_done]).toEqual([0, true, true, true]);
      expect(again.info.valid_actions).toEqual([]);
      expect(again.obs.text).toContain("the extracted valid action is []");
      expect(again.obs.text).toContain(" V ");
    }
    expect(env.totalReward).toBeCloseTo(1.02, 10);
  });

  test("FrozenLake in a hole: no format reward, no move, still done and failed", async () => {
    const env = new FrozenLakeEnv({ desc: ["SHG"], prompt_format: "free_think" });
    await env.reset(0);
    expect((await env.step(answer("Right"))).done).toBe(true);
    const after = await env.step(answer("Right"));
    expect([after.reward, after.done, after.info.success]).toEqual([0, true, false]);
  });

  test("FrozenLake's new episode starts fresh after reset", async () => {
    const env = new FrozenLakeEnv({ desc: ["SFG"], prompt_format: "free_think" });
    await env.reset(0);
    await env.step(answer("Right, Right"));
    await env.reset(0);
    expect((await env.step(answer("Right, Right"))).reward).toBeCloseTo(1.02, 10);
  });

  test("Sokoban once solved: the success reward is not paid again", async () => {
    const env = new SokobanEnv({ prompt_format: "free_think", max_actions_per_step: 100 });
    await env.reset(0);
    const solution = shortestSolution(env.currentRoom!)!;
    const solved = await env.step(answer(solution.join(",")));
    expect([solved.reward, solved.done]).toEqual([1.1, true]);
    const again = await env.step(answer("Left"));
    expect([again.reward, again.done, again.info.success, again.info.after_done]).toEqual([0, true, true, true]);
  });
});
