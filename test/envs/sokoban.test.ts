import { describe, expect, test } from "bun:test";
import { getPixel } from "../../envs/_common/image.ts";
import { wrapActions } from "../../envs/_common/parsers.ts";
import { SokobanEnv } from "../../envs/sokoban/env.ts";
import { generateLevel, generateRoom } from "../../envs/sokoban/generate.ts";
import { applyMove, countBoxesOnTarget } from "../../envs/sokoban/dynamics.ts";
import { PALETTE, SokobanImageRenderer, TILE_SIZE, renderText } from "../../envs/sokoban/render.ts";
import { CELL, playerIndex, roomFromText, type SokobanRoom } from "../../envs/sokoban/room.ts";
import { shortestSolution } from "../../envs/sokoban/solver.ts";
import { Rng } from "../../src/core/rng.ts";

const answer = (actions: string) => `<think>x</think><answer>${actions}</answer>`;

/** A free_think env whose room is replaced by `text` after reset. */
async function envWithRoom(text: string, config: Record<string, unknown> = {}): Promise<{ env: SokobanEnv; room: SokobanRoom }> {
  const env = new SokobanEnv({ prompt_format: "free_think", ...config });
  await env.reset(0);
  const room = env.currentRoom!;
  const custom = roomFromText(text);
  Object.assign(room, custom);
  (env as unknown as { player: number }).player = playerIndex(custom);
  return { env, room };
}

describe("generation", () => {
  test("same seed, same level; pinned layout for seed 0", async () => {
    const a = new SokobanEnv({ prompt_format: "free_think" });
    const b = new SokobanEnv({ prompt_format: "free_think" });
    const [ra, rb] = [await a.reset(0), await b.reset(0)];
    expect(ra.obs.text).toBe(rb.obs.text);
    expect(ra.obs.text).toBe(
      "[Initial Observation]:\n" +
        " #  #  #  #  #  # \n #  #  _  P  _  # \n #  _  _  X  #  # \n #  O  _  _  _  # \n #  #  _  _  _  # \n #  #  #  #  #  # " +
        "\nDecide your next action(s).\n",
    );
    expect((await a.reset(1)).obs.text).not.toBe(ra.obs.text);
    expect((await a.reset(0)).obs.text).toBe(ra.obs.text);
  });

  test("rooms are well formed: walled border, boxes off their targets, one player", () => {
    for (let seed = 0; seed < 40; seed++) {
      const room = generateRoom(new Rng(seed), { height: 7, width: 8, numBoxes: 2 });
      const count = (cells: Uint8Array, v: number) => cells.filter((c) => c === v).length;
      expect(count(room.state, CELL.player)).toBe(1);
      expect(count(room.state, CELL.box)).toBe(2);
      expect(count(room.fixed, CELL.target)).toBe(2);
      expect(countBoxesOnTarget(room)).toBe(0);
      for (let r = 0; r < 7; r++) for (let c = 0; c < 8; c++) {
        if (r === 0 || c === 0 || r === 6 || c === 7) expect(room.fixed[r * 8 + c]).toBe(CELL.wall);
      }
    }
  });

  test("every level is solvable within the configured solution range (BFS over 150 seeds)", () => {
    for (let seed = 0; seed < 150; seed++) {
      const level = generateLevel(seed, { height: 6, width: 6, numBoxes: 1, solutionRange: [1, 5], maxTries: 10000, bfsMaxDepth: 200 });
      expect(level.accepted).toBe(true);
      const solution = shortestSolution(level.room, 200)!;
      expect(solution.length).toBeGreaterThanOrEqual(1);
      expect(solution.length).toBeLessThanOrEqual(5);
      expect(level.solution).toEqual(solution);
    }
  });

  test("two-box levels in a range are solvable too", () => {
    for (let seed = 0; seed < 20; seed++) {
      const level = generateLevel(seed, { height: 7, width: 7, numBoxes: 2, solutionRange: [2, 12], maxTries: 10000, bfsMaxDepth: 100 });
      expect(level.accepted).toBe(true);
      expect(level.solution!.length).toBeGreaterThanOrEqual(2);
      expect(level.solution!.length).toBeLessThanOrEqual(12);
    }
  });

  test("the env solves its level by following the BFS solution", async () => {
    for (let seed = 0; seed < 25; seed++) {
      const env = new SokobanEnv({ prompt_format: "free_think", min_solution_steps: [1, 6], max_actions_per_step: 100 });
      await env.reset(seed);
      const solution = shortestSolution(env.currentRoom!)!;
      const result = await env.step(answer(solution.join(",")));
      expect(result.done).toBe(true);
      expect(result.info.success).toBe(true);
      expect(result.reward).toBeCloseTo(1.1, 10);
    }
  });

  test("state_key changes with every move that changes the room, and only then", async () => {
    const env = new SokobanEnv({ prompt_format: "free_think", max_actions_per_step: 10 });
    const first = (await env.reset(3)).info.state_key as string;
    expect(first).toMatch(/^\d+x\d+:[0-9a-f]+$/);
    let previous = first;
    let moved = 0;
    for (const a of ["up", "down", "left", "right", "left", "up"]) {
      const before = Buffer.from(env.currentRoom!.state).toString("hex");
      const key = (await env.step(answer(a))).info.state_key as string;
      const changed = Buffer.from(env.currentRoom!.state).toString("hex") !== before;
      if (changed) moved++;
      expect(key === previous).toBe(!changed);
      previous = key;
    }
    expect(moved).toBeGreaterThan(0);
    // The same level again gives the same key.
    expect((await env.reset(3)).info.state_key).toBe(first);
  });
});

describe("BFS solver", () => {
  test("shortest path and unsolvable rooms", () => {
    expect(shortestSolution(roomFromText("#####\n#PXO#\n#####"))).toEqual(["right"]);
    expect(shortestSolution(roomFromText("######\n#P_XO#\n######"))).toEqual(["right", "right"]);
    // Box in a corner can never reach the target.
    expect(shortestSolution(roomFromText("#####\n#X_O#\n#_P_#\n#####"))).toBeNull();
    expect(shortestSolution(roomFromText("#####\n#P√_#\n#####"))).toEqual([]);
    // Depth cap.
    expect(shortestSolution(roomFromText("########\n#P___XO#\n########"), 3)).toBeNull();
    expect(shortestSolution(roomFromText("########\n#P___XO#\n########"), 4)).toEqual(["right", "right", "right", "right"]);
  });
});

describe("step semantics", () => {
  test("pushing a box into a wall does nothing, but the action counts as executed", async () => {
    const { env } = await envWithRoom("######\n#_PX##\n#O___#\n######");
    const r = await env.step(answer("Right"));
    expect(renderText(env.currentRoom!)).toBe(" #  #  #  #  #  # \n #  _  P  X  #  # \n #  O  _  _  _  # \n #  #  #  #  #  # ");
    expect(r.info.metrics!.turn_metrics).toMatchObject({ action_is_valid: true, action_is_effective: false });
    expect(r.reward).toBeCloseTo(0.1, 10);
    expect(r.obs.text.startsWith("After your answer, the extracted valid action is ['right'].\n")).toBe(true);
  });

  test("a box cannot be pushed into another box", async () => {
    const { env, room } = await envWithRoom("#######\n#PXX__#\n#O_O__#\n#######");
    await env.step(answer("right"));
    expect(room.state[1 * 7 + 1]).toBe(CELL.player);
    expect(room.state[1 * 7 + 2]).toBe(CELL.box);
    expect(room.state[1 * 7 + 3]).toBe(CELL.box);
  });

  test("pushing a box onto the last target solves the room", async () => {
    const { env } = await envWithRoom("######\n#PXO_#\n######");
    const r = await env.step(answer("right, right"));
    expect(r.done).toBe(true);
    expect(r.info.success).toBe(true);
    expect(r.info.valid_actions).toEqual(["right"]); // the turn stops at success
    expect(r.reward).toBeCloseTo(1.1, 10);
    expect(renderText(env.currentRoom!)).toBe(" #  #  #  #  #  # \n #  _  P  √  _  # \n #  #  #  #  #  # ");
  });

  test("boxes move on and off targets; the player can stand on a target", async () => {
    const { env, room } = await envWithRoom("#######\n#P√__##\n#__X_O#\n#######");
    await env.step(answer("right"));
    expect(renderText(room)).toBe(" #  #  #  #  #  #  # \n #  _  S  X  _  #  # \n #  _  _  X  _  O  # \n #  #  #  #  #  #  # ");
    expect(countBoxesOnTarget(room)).toBe(0);
    const s = (await env.step(answer("right"))).info.state as { player: number[]; objects: { object_id: string; position: number[]; covered?: boolean }[] };
    expect(s.player).toEqual([1, 3]);
    expect(s.objects.find((o) => o.object_id === "target" && o.position[1] === 2)!.covered).toBe(false);
  });

  test("an unknown word stops the turn; earlier moves stand and still earn the format reward", async () => {
    const { env } = await envWithRoom("#######\n#P____#\n#___XO#\n#######");
    const r = await env.step(answer("right, jump, right"));
    expect(r.info.valid_actions).toEqual(["right"]);
    expect(r.info.metrics!.turn_metrics).toMatchObject({ action_is_valid: false, action_is_effective: true });
    expect(r.reward).toBeCloseTo(0.1, 10);
    expect(r.done).toBe(false);
  });

  test("malformed responses: no move, reward 0, observation says []", async () => {
    const { env } = await envWithRoom("#######\n#P____#\n#___XO#\n#######");
    for (const text of ["", "Right", "<answer>Right</answer>", "<think>x</think><answer>jump</answer>"]) {
      const r = await env.step(text);
      expect(r.reward).toBe(0);
      expect(r.done).toBe(false);
      expect(r.obs.text).toContain("the extracted valid action is [].");
      expect(r.info.metrics!.turn_metrics!.action_is_valid).toBe(false);
    }
  });

  test("wm's strict_format: a malformed turn runs none of its salvaged actions unless strict_format is false", async () => {
    const legacy = "<observation>o</observation><think>t</think><answer>Right</answer><prediction>p</prediction>";
    const strict = (await envWithRoom("#######\n#P____#\n#___XO#\n#######", { prompt_format: "wm" })).env;
    const r = await strict.step(legacy);
    expect(r.info.format_correct).toBe(false);
    expect(r.info.actions).toEqual(["right"]);
    expect(r.reward).toBe(0);
    expect(r.obs.text).toContain("the extracted valid action is [].");
    const loose = (await envWithRoom("#######\n#P____#\n#___XO#\n#######", { prompt_format: "wm", strict_format: false })).env;
    const salvaged = await loose.step(legacy);
    expect(salvaged.info.metrics!.turn_metrics!.action_is_effective).toBe(true);
    expect(salvaged.reward).toBeCloseTo(0.1);
  });

  test("actions beyond max_actions_per_step are dropped", async () => {
    const { env } = await envWithRoom("########\n#P_____#\n#___XO_#\n########", { max_actions_per_step: 2 });
    const r = await env.step(answer("right,right,right,right"));
    expect(r.info.valid_actions).toEqual(["right", "right"]);
  });

  test("paper reward preset sums gym-sokoban rewards and pays 0.5 for a valid turn", async () => {
    const { env } = await envWithRoom("#######\n#PX_O_#\n#######", { reward_preset: "paper" });
    const r1 = await env.step(answer("right"));
    expect(r1.reward).toBeCloseTo(-0.1 + 0.5, 10);
    const r2 = await env.step(answer("right"));
    expect(r2.reward).toBeCloseTo(-0.1 + 1 + 10 + 0.5, 10);
    const { env: env2 } = await envWithRoom("#######\n#PX_O_#\n#######", { reward_preset: "paper" });
    const invalid = await env2.step(answer("right, jump"));
    expect(invalid.reward).toBeCloseTo(-0.1, 10); // no format reward when a word is invalid
  });

  test("applyMove reports gym rewards for box off target", () => {
    const room = roomFromText("######\n#P√_O#\n######");
    const move = applyMove(room, playerIndex(room), "right");
    expect(move.pushedBox).toBe(true);
    expect(move.gymReward).toBeCloseTo(-1.1, 10);
  });
});

describe("rendering and prompts", () => {
  test("vision mode: one 16 px tile per cell, placeholder in text", async () => {
    const env = new SokobanEnv({ render_mode: "vision", dim_room: [6, 7] });
    const { obs } = await env.reset(4);
    expect(obs.text).toBe("[Initial Observation]:\n<image>\nDecide your next action(s).\n");
    expect(obs.images).toHaveLength(1);
    const img = obs.images[0]!;
    expect([img.width, img.height]).toEqual([7 * TILE_SIZE, 6 * TILE_SIZE]);
    expect(getPixel(img, 0, 0)).toEqual([...PALETTE.brick]); // top-left cell is always wall
    const room = env.currentRoom!;
    const target = room.fixed.indexOf(CELL.target);
    const [tr, tc] = [Math.floor(target / 7), target % 7];
    expect(getPixel(img, tc * TILE_SIZE + 3, tr * TILE_SIZE + 3)).toEqual([...PALETTE.target]);
    const box = room.state.indexOf(CELL.box);
    expect(getPixel(img, (box % 7) * TILE_SIZE + 8, Math.floor(box / 7) * TILE_SIZE + 5)).toEqual([...PALETTE.crate]);
  });

  test("incremental rendering equals a fresh render", async () => {
    const env = new SokobanEnv({ render_mode: "vision", prompt_format: "free_think" });
    await env.reset(11);
    for (const a of ["up", "left", "down", "right", "right"]) {
      const { obs } = await env.step(answer(a));
      const fresh = new SokobanImageRenderer().render(env.currentRoom!);
      expect(Buffer.from(obs.images[0]!.data).equals(Buffer.from(fresh.data))).toBe(true);
    }
  });

  test("system prompts match VAGEN's composition", async () => {
    const wm = (await new SokobanEnv({}).systemPrompt()).text;
    expect(wm.startsWith("You are a Sokoban solver.\nSokoban Quick Guide\n")).toBe(true);
    expect(wm).toContain("Actions you can take: Left, Down, Right, Up.\nYou can take up to 3 action(s) at a time, separated by ,.\nYour response must be in the format of:\n<perception>...</perception><reasoning>...</reasoning><prediction>...</prediction><answer>...</answer>\nThe order is required");
    expect(wm).toContain("- Separate multiple actions with `,`.\n\n\nExample 1:");
    const ft = (await new SokobanEnv({ prompt_format: "free_think", use_example_in_sys_prompt: false }).systemPrompt()).text;
    expect(ft.endsWith("Your response should be in the format of:\n<think>...</think><answer>...</answer>")).toBe(true);
    const wmThink = (await new SokobanEnv({ prompt_format: "wm_think" }).systemPrompt()).text;
    expect(wmThink).toContain("You may think first inside <think>...</think>");
    expect((await new SokobanEnv({ prompt_format: "free_wm" }).systemPrompt()).text).toBe(wmThink);
    const paper = (await new SokobanEnv({ prompt_format: "grounding_worldmodeling" }).systemPrompt()).text;
    expect(paper).toContain("e.g. <think><observation>");
    expect(paper).toContain("<answer>Right,Down</answer>");
  });

  test("every prompt format round-trips through its parser", async () => {
    for (const format of ["free_think", "wm", "wm_think", "free_wm", "no_think", "eval_mode", "grounding", "worldmodeling", "grounding_worldmodeling"] as const) {
      const env = new SokobanEnv({ prompt_format: format, min_solution_steps: [1, 3], max_actions_per_step: 10 });
      await env.reset(2);
      const solution = shortestSolution(env.currentRoom!)!;
      const r = await env.step(wrapActions(format, solution.join(",")));
      expect(r.info.success).toBe(true);
    }
  });

  test("config errors name the key and the expectation", () => {
    expect(() => new SokobanEnv({ num_boxes: 0 })).toThrow(/num_boxes.*>=1/);
    expect(() => new SokobanEnv({ prompt_format: "fancy" } as never)).toThrow(/prompt_format/);
    expect(() => new SokobanEnv({ dim_rooms: [6, 6] } as never)).toThrow(/did you mean "dim_room"/);
  });
});
