import { describe, expect, test } from "bun:test";
import { getPixel } from "../../envs/_common/image.ts";
import { FrozenLakeEnv } from "../../envs/frozenlake/env.ts";
import { generateRandomMap, isValidMap, shortestPath } from "../../envs/frozenlake/map.ts";
import { FL_PALETTE, FrozenLakeImageRenderer, renderText, windowSize } from "../../envs/frozenlake/render.ts";

const answer = (actions: string) => `<think>x</think><answer>${actions}</answer>`;
const MAP = ["SFFF", "FHFH", "FFFH", "HFFG"];

describe("maps", () => {
  test("same seed, same map; pinned map for seed 0", () => {
    expect(generateRandomMap(4, 0.8, 0)).toEqual(["HHGS", "FFFH", "FFHF", "HFFF"]);
    expect(generateRandomMap(6, 0.7, 123)).toEqual(generateRandomMap(6, 0.7, 123));
    expect(generateRandomMap(4, 0.8, 1)).not.toEqual(generateRandomMap(4, 0.8, 0));
  });

  test("every generated map has one start and goal joined by a path (300 seeds)", () => {
    for (let seed = 0; seed < 300; seed++) {
      const size = 3 + (seed % 5);
      const map = generateRandomMap(size, 0.7, seed);
      const flat = map.join("");
      expect(map).toHaveLength(size);
      expect(flat.split("S").length - 1).toBe(1);
      expect(flat.split("G").length - 1).toBe(1);
      expect(isValidMap(map)).toBe(true);
    }
  });

  test("BFS solver", () => {
    expect(shortestPath(MAP)).toEqual(["down", "down", "right", "down", "right", "right"]);
    expect(shortestPath(["SH", "HG"])).toBeNull();
  });
});

describe("dynamics and rewards", () => {
  test("walking to the goal: success, reward 1 + 0.02, done", async () => {
    const env = new FrozenLakeEnv({ desc: MAP });
    await env.reset(0);
    const r = await env.step(answer("down, down, right, right, down"));
    expect(r.done).toBe(false);
    expect(r.reward).toBeCloseTo(0.02, 10);
    const g = await env.step(answer("right, up"));
    expect(g.done).toBe(true);
    expect(g.info.success).toBe(true);
    expect(g.info.valid_actions).toEqual(["right"]);
    expect(g.reward).toBeCloseTo(1.02, 10);
    expect(renderText({ desc: MAP, row: 3, col: 3, lastAction: "right" }).split("\n")[3]).toBe(" O  _  _  V ");
  });

  test("falling into a hole ends the episode without success", async () => {
    const env = new FrozenLakeEnv({ desc: MAP });
    await env.reset(0);
    const r = await env.step(answer("down, right, right"));
    expect(r.done).toBe(true);
    expect(r.info.success).toBe(false);
    expect(r.info.valid_actions).toEqual(["down", "right"]);
    expect(r.reward).toBeCloseTo(0.02, 10);
    expect(r.obs.text).toContain(" _  X  _  O ");
  });

  test("the edge clamps; ineffective moves are flagged", async () => {
    const env = new FrozenLakeEnv({ desc: MAP });
    await env.reset(0);
    const r = await env.step(answer("up, left"));
    expect(r.info.metrics!.turn_metrics).toMatchObject({ action_is_valid: true, action_is_effective: false });
    expect((r.info.state as { player: number[] }).player).toEqual([0, 0]);
  });

  test("state_key names the board and the player's cell, whatever the route there", async () => {
    const env = new FrozenLakeEnv({ desc: MAP });
    const start = (await env.reset(0)).info.state_key;
    expect(start).toBe("SFFF/FHFH/FFFH/HFFG@0,0");
    const bump = await env.step(answer("up"));
    expect(bump.info.state_key).toBe(start);
    const viaRight = (await env.step(answer("right, down"))).info.state_key; // (1,1) is a hole
    expect(viaRight).toBe("SFFF/FHFH/FFFH/HFFG@1,1");
    await env.reset(0);
    await env.step(answer("down"));
    await env.step(answer("down"));
    const a = (await env.step(answer("right"))).info.state_key;
    await env.reset(0);
    await env.step(answer("down"));
    await env.step(answer("right"));
    expect(a).toBe("SFFF/FHFH/FFFH/HFFG@2,1");
    expect((await env.step(answer("down, left"))).info.state_key).not.toBe(a);
  });

  test("unknown words stop the turn; malformed text costs only the turn", async () => {
    const env = new FrozenLakeEnv({ desc: MAP });
    await env.reset(0);
    const r = await env.step(answer("down, fly, down"));
    expect(r.info.valid_actions).toEqual(["down"]);
    expect(r.info.metrics!.turn_metrics!.action_is_valid).toBe(false);
    expect(r.reward).toBeCloseTo(0.02, 10);
    const bad = await env.step("down please");
    expect(bad.reward).toBe(0);
    expect(bad.obs.text).toContain("the extracted valid action is [].");
  });

  test("slippery ice and custom slip are seeded by the reset seed", async () => {
    const run = async (config: Record<string, unknown>) => {
      const env = new FrozenLakeEnv({ size: 8, p: 1, ...config });
      await env.reset(17);
      const positions: number[][] = [];
      for (let i = 0; i < 12; i++) positions.push((((await env.step(answer("right"))).info.state) as { player: number[] }).player);
      return positions;
    };
    const slippery = await run({ is_slippery: true });
    expect(await run({ is_slippery: true })).toEqual(slippery);
    const straight = await run({});
    expect(slippery).not.toEqual(straight);
    expect(await run({ slip_prob: 0.5 })).not.toEqual(straight);
  });

  test("paper preset: 0.5 per valid turn and 10 at the goal", async () => {
    const env = new FrozenLakeEnv({ desc: ["SG"], reward_preset: "paper" });
    await env.reset(0);
    expect((await env.step(answer("right"))).reward).toBeCloseTo(10.5, 10);
  });

  test("ground-truth state lists goal and holes relative to the player", async () => {
    const env = new FrozenLakeEnv({ desc: MAP });
    const { info } = await env.reset(0);
    const state = info.state as { player: number[]; objects: { object_id: string; position: number[]; vertical_relation: string; horizontal_relation: string }[] };
    expect(state.player).toEqual([0, 0]);
    expect(state.objects.find((o) => o.object_id === "goal")).toMatchObject({ position: [3, 3], vertical_relation: "below", horizontal_relation: "right" });
    expect(state.objects.filter((o) => o.object_id === "hole")).toHaveLength(4);
  });
});

describe("rendering and prompts", () => {
  test("text grid", async () => {
    const env = new FrozenLakeEnv({ desc: MAP });
    const { obs } = await env.reset(0);
    expect(obs.text).toBe("[Initial Observation]:\n P  _  _  _ \n _  O  _  O \n _  _  _  O \n O  _  _  G \nDecide your next action(s).\n");
  });

  test("vision: 256x256 for 4x4, window capped at 512", async () => {
    const env = new FrozenLakeEnv({ desc: MAP, render_mode: "vision" });
    const { obs } = await env.reset(0);
    const img = obs.images[0]!;
    expect([img.width, img.height]).toEqual([256, 256]);
    expect(getPixel(img, 64 + 32, 64 + 32)).toEqual([...FL_PALETTE.water]); // hole at (1,1)
    expect(getPixel(img, 3 * 64 + 20, 3 * 64 + 40)).toEqual([...FL_PALETTE.gift]); // goal at (3,3)
    expect(getPixel(img, 2 * 64 + 5, 5)).toEqual([...FL_PALETTE.ice]);
    expect(windowSize(10, 10)).toEqual({ width: 512, height: 512, cellWidth: 51, cellHeight: 51 });
    const big = new FrozenLakeImageRenderer().render({ desc: Array(10).fill("SFFFFFFFFG".replace("S", "F")).map((r, i) => (i === 0 ? "SFFFFFFFFF" : i === 9 ? "FFFFFFFFFG" : r)), row: 0, col: 0, lastAction: null });
    expect([big.width, big.height]).toEqual([512, 512]);
  });

  test("prompts", async () => {
    const ft = (await new FrozenLakeEnv({}).systemPrompt()).text;
    expect(ft.startsWith("You are a FrozenLake solver.\nFrozenLake Quick Guide\nGoal: Reach the goal (G).")).toBe(true);
    expect(ft).toContain("You can take up to 5 action(s) at a time, separated by ,.");
    const wm = (await new FrozenLakeEnv({ prompt_format: "wm", use_example_in_sys_prompt: false }).systemPrompt()).text;
    expect(wm.endsWith("- Separate multiple actions with `,`.")).toBe(true);
    expect(wm).toContain("the `goal` and any visible `hole` objects");
  });
});
