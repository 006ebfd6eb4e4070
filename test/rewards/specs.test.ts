import { describe, expect, test } from "bun:test";
import { FrozenLakeEnv, FROZENLAKE_STATE_REWARD_SPEC } from "../../envs/frozenlake/index.ts";
import { SokobanEnv, SOKOBAN_STATE_REWARD_SPEC } from "../../envs/sokoban/index.ts";
import { roomFromText } from "../../envs/sokoban/room.ts";
import { playerIndex } from "../../envs/sokoban/room.ts";

const sokobanExact = SOKOBAN_STATE_REWARD_SPEC.exactParser!;
const frozenExact = FROZENLAKE_STATE_REWARD_SPEC.exactParser!;

describe("Sokoban's exact parser (main's closed vocabulary)", () => {
  test("main's prompt examples", () => {
    expect(sokobanExact("The box is below and in the same column as the player, and the target is below and in the same column as the player.")).toEqual([
      { object_id: "box", vertical_relation: "below", horizontal_relation: "same" },
      { object_id: "target", vertical_relation: "below", horizontal_relation: "same" },
    ]);
    expect(sokobanExact("The box will be below and in the same column as the player, and the target will be in the same row and same column as the player.")).toEqual([
      { object_id: "box", vertical_relation: "below", horizontal_relation: "same" },
      { object_id: "target", vertical_relation: "same", horizontal_relation: "same" },
    ]);
  });

  test("articles, numbered boxes and case; several boxes", () => {
    expect(sokobanExact("Box 1 is ABOVE and left of the player; another box is same row and right of the player. A target is below and right.")).toEqual([
      { object_id: "box", vertical_relation: "above", horizontal_relation: "left" },
      { object_id: "box", vertical_relation: "same", horizontal_relation: "right" },
      { object_id: "target", vertical_relation: "below", horizontal_relation: "right" },
    ]);
  });

  test("an axis is null unless exactly one of its values is named", () => {
    expect(sokobanExact("The box is above or below the player, somewhere right")).toEqual([
      { object_id: "box", vertical_relation: null, horizontal_relation: "right" },
    ]);
    // "same" alone is not "same row" / "same column".
    expect(sokobanExact("The target is at the same place as the player")).toEqual([
      { object_id: "target", vertical_relation: null, horizontal_relation: null },
    ]);
    expect(sokobanExact("Nothing to see here.")).toEqual([]);
  });
});

describe("FrozenLake's exact parser", () => {
  test("goal and gift box read as the target; holes as holes", () => {
    expect(frozenExact("The goal is below and right of the player, and there is a hole below and same column of the player")).toEqual([
      { object_id: "target", vertical_relation: "below", horizontal_relation: "right" },
      { object_id: "hole", vertical_relation: "below", horizontal_relation: "same" },
    ]);
    expect(frozenExact("The gift box is same row and left of the player")).toEqual([
      { object_id: "target", vertical_relation: "same", horizontal_relation: "left" },
    ]);
  });
});

describe("gold relations from the envs' info.state", () => {
  test("Sokoban: every box and every target, relative to the player; the env declares its spec", async () => {
    const env = new SokobanEnv({ prompt_format: "wm" });
    expect(env.stateRewardSpec).toBe(SOKOBAN_STATE_REWARD_SPEC);
    await env.reset(0);
    const room = env.currentRoom!;
    Object.assign(room, roomFromText("#######\n#_O___#\n#__P_X#\n#___O_#\n#######"));
    (env as unknown as { player: number }).player = playerIndex(room);
    const r = await env.step("<perception>-</perception><reasoning>-</reasoning><prediction>-</prediction><answer>Left</answer>");
    // After moving left the player is at (2,2): box (2,5) same/right; targets (1,2) above/same, (3,4) below/right.
    expect(SOKOBAN_STATE_REWARD_SPEC.relations(r.info.state)).toEqual([
      { object_id: "box", vertical_relation: "same", horizontal_relation: "right" },
      { object_id: "target", vertical_relation: "above", horizontal_relation: "same" },
      { object_id: "target", vertical_relation: "below", horizontal_relation: "right" },
    ]);
    expect(SOKOBAN_STATE_REWARD_SPEC.relations(undefined)).toEqual([]);
    expect(SOKOBAN_STATE_REWARD_SPEC.relations({ nonsense: true })).toEqual([]);
  });

  test("FrozenLake: the goal as the target and every hole; weights 0.7 / 0.3", async () => {
    const env = new FrozenLakeEnv({ desc: ["SFF", "FHF", "FFG"], prompt_format: "wm" });
    expect(env.stateRewardSpec.objectWeights).toEqual({ target: 0.7, hole: 0.3 });
    const { info } = await env.reset(0);
    expect(FROZENLAKE_STATE_REWARD_SPEC.relations(info.state)).toEqual([
      { object_id: "hole", vertical_relation: "below", horizontal_relation: "right" },
      { object_id: "target", vertical_relation: "below", horizontal_relation: "right" },
    ]);
  });
});
