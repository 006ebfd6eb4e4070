import { describe, expect, test } from "bun:test";
import { SOKOBAN_STATE_REWARD_SPEC as SPEC } from "../../envs/sokoban/index.ts";
import { tokenEndsFromPieces, lastTokenOverlapping } from "../../src/rewards/credit.ts";
import { aggregateEpisode, episodeStateRewardMetrics, placeRewards, StateRewardScorer } from "../../src/rewards/state-reward.ts";
import { config, EXACT_BOTH, gridState, wm } from "./helpers.ts";

// Player at (2,2), box below at (3,2), target below at (4,2); "Down" pushes the box onto
// the target, the player now at (3,2): both below and in the same column, before and after.
const before = gridState([2, 2], [["box", [3, 2]], ["target", [4, 2]]]);
const after = gridState([3, 2], [["box", [4, 2]], ["target", [4, 2]]]);
const RIGHT_NOW = "The box is below and same column of the player, and the target is below and same column of the player";
const RIGHT_NEXT = "The box will be below and same column of the player, and the target will be below and same column of the player";

describe("exact scorer end to end", () => {
  test("perfect sections pay their full reward; a half-right one pays its rescaled F1", async () => {
    const scorer = new StateRewardScorer(config(EXACT_BOTH), SPEC, null);
    const [perfect, half] = await scorer.scoreTurns([
      { response: wm(RIGHT_NOW, RIGHT_NEXT), stateBefore: before, stateAfter: after },
      // Box right, target only vertically right: target F1 0.5, box 1 -> 0.75 -> (0.75 - 0.334) / 0.666.
      { response: wm("The box is below and same column of the player, and the target is below and left of the player", RIGHT_NEXT), stateBefore: before, stateAfter: after },
    ]);
    expect(perfect!.gate).toBe("ok");
    expect(perfect!.sections.map((s) => [s.section, s.status, s.score])).toEqual([
      ["state_estimation", "scored", 1],
      ["transition_prediction", "scored", 1],
    ]);
    expect(perfect!.total).toBe(2);
    expect(half!.sections[0]!.quality).toBeCloseTo(0.75, 12);
    expect(half!.sections[0]!.score).toBeCloseTo((0.75 - 0.334) / 0.666, 12);
    expect(half!.total).toBeCloseTo(1 + (0.75 - 0.334) / 0.666, 12);
  });

  test("only enabled sections are scored, each against its own state", async () => {
    const scorer = new StateRewardScorer(config({ transition_prediction: { enable: true, reward: 0.5 }, scorer: "exact", score_base: 0 }), SPEC, null);
    // The prediction repeats the current layout, which is wrong after the move for the target.
    const [turn] = await scorer.scoreTurns([{ response: wm("anything", "The box is below and same column of the player, and the target is below and same column of the player"), stateBefore: before, stateAfter: gridState([3, 2], [["box", [4, 2]], ["target", [1, 2]]]) }]);
    expect(turn!.sections.map((s) => s.section)).toEqual(["transition_prediction"]);
    // box 1, target (below,same) vs (above,same): 0.5 -> 0.5·1 + 0.5·0.5 = 0.75, no floor, reward 0.5.
    expect(turn!.sections[0]!.score).toBeCloseTo(0.375, 12);
  });
});

describe("format gates", () => {
  const scorer = new StateRewardScorer(config(EXACT_BOTH), SPEC, null);
  const score = async (response: string) => (await scorer.scoreTurns([{ response, stateBefore: before, stateAfter: after }]))[0]!;

  test("anything but the exact protocol scores 0 everywhere", async () => {
    for (const response of [
      // Legacy order (answer before prediction), legacy tags, junk around, a missing section.
      `<perception>${RIGHT_NOW}</perception><reasoning>r</reasoning><answer>Down</answer><prediction>${RIGHT_NEXT}</prediction>`,
      `<observation>${RIGHT_NOW}</observation><think>r</think><prediction>${RIGHT_NEXT}</prediction><answer>Down</answer>`,
      `Sure! ${wm(RIGHT_NOW, RIGHT_NEXT)}`,
      `<perception>${RIGHT_NOW}</perception><reasoning>r</reasoning><answer>Down</answer>`,
    ]) {
      const turn = await score(response);
      expect(turn.gate).toBe("format");
      expect(turn.total).toBe(0);
      expect(turn.sections.every((s) => s.status === "gated" && s.score === 0)).toBe(true);
    }
  });

  test("an empty enabled section gates every section", async () => {
    const turn = await score(wm("  ", RIGHT_NEXT));
    expect(turn.gate).toBe("missing_section");
    expect(turn.sections.map((s) => s.score)).toEqual([0, 0]);
  });

  test("native thinking before the body is allowed", async () => {
    const turn = await score(`<think>the box is below me</think>\n${wm(RIGHT_NOW, RIGHT_NEXT)}`);
    expect(turn.formatCorrect).toBe(true);
    expect(turn.total).toBe(2);
  });
});

describe("credit placement on a scripted response", () => {
  // Token pieces as a tokenizer would decode them; the last is an end-of-turn token that
  // decodes to "" (skip_special_tokens).
  const pieces = [
    "<perception>", "The box is below and same column of the player,", " and the target is below and same column of the player", "</perception>",
    "<reasoning>", "push it", "</reasoning>",
    "<prediction>", "The box will be below and same column of the player,", " and the target will be below and same column of the player", "</prediction>",
    "<answer>", "Down", "</answer>", "",
  ];
  const response = pieces.join("");
  const tokenEnds = tokenEndsFromPieces(pieces);

  test("section_end: each score on the last token overlapping its section", async () => {
    const scorer = new StateRewardScorer(config(EXACT_BOTH), SPEC, null);
    const [turn] = await scorer.scoreTurns([{ response, tokenEnds, stateBefore: before, stateAfter: after }]);
    expect(turn!.sections.map((s) => s.position)).toEqual([2, 9]);
    const rewards = placeRewards(turn!, new Array(pieces.length).fill(0));
    expect(rewards).toEqual([0, 0, 1, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0]);
  });

  test("turn_end: both scores on the turn's last token", async () => {
    const scorer = new StateRewardScorer(config({ ...EXACT_BOTH, credit_site: "turn_end" }), SPEC, null);
    const [turn] = await scorer.scoreTurns([{ response, tokenEnds, stateBefore: before, stateAfter: after }]);
    expect(turn!.sections.map((s) => s.position)).toEqual([14, 14]);
    expect(placeRewards(turn!, new Array(pieces.length).fill(0))[14]).toBe(2);
  });

  test("a boundary token that straddles the closing tag still counts; without token ends there is no position", async () => {
    // "...player</perc" + "eption>": the piece holding the section's last characters wins.
    expect(lastTokenOverlapping({ start: 12, end: 20 }, tokenEndsFromPieces(["<perception>", "abc", "defgh</perc", "eption>"]))).toBe(2);
    expect(lastTokenOverlapping({ start: 12, end: 20 }, [])).toBeNull();
    const scorer = new StateRewardScorer(config(EXACT_BOTH), SPEC, null);
    const [turn] = await scorer.scoreTurns([{ response, stateBefore: before, stateAfter: after }]);
    expect(turn!.sections.map((s) => s.position)).toEqual([null, null]);
  });
});

describe("episodes", () => {
  test("per_turn keeps scores; episode_mean divides by the turn count; metrics sum the episode", async () => {
    const cfg = config(EXACT_BOTH);
    const scorer = new StateRewardScorer(cfg, SPEC, null);
    const turns = await scorer.scoreTurns([
      { response: wm(RIGHT_NOW, RIGHT_NEXT), stateBefore: before, stateAfter: after },
      { response: "<answer>Down</answer>", stateBefore: after, stateAfter: after },
    ]);
    expect(turns.map((t) => t.total)).toEqual([2, 0]);
    expect(aggregateEpisode(turns, "per_turn").map((t) => t.total)).toEqual([2, 0]);
    const mean = aggregateEpisode(turns, "episode_mean");
    expect(mean.map((t) => t.sections.map((s) => s.score))).toEqual([[0.5, 0.5], [0, 0]]);
    expect(episodeStateRewardMetrics(turns, cfg)).toEqual({ state_estimation_reward: 1, transition_prediction_reward: 1, format_correct_rate: 0.5 });
    expect(episodeStateRewardMetrics(mean, cfg).state_estimation_reward).toBe(0.5);
  });
});

describe("token ends", () => {
  test("by bytes: a character split over two tokens counts at the token that completes it", async () => {
    const { tokenEndsFromBytes, tokenEndsByPrefixDecode } = await import("../../src/rewards/credit.ts");
    // "é" is 0xC3 0xA9; tokens: "a", 0xC3, 0xA9, "b"; 99 is a special token (no bytes).
    const bytes: Record<number, number[]> = { 1: [0x61], 2: [0xc3], 3: [0xa9], 4: [0x62], 99: [] };
    const bytesOf = (id: number) => new Uint8Array(bytes[id]!);
    expect(tokenEndsFromBytes([1, 2, 3, 4, 99], bytesOf)).toEqual([1, 1, 2, 3, 3]);
    const decode = (ids: number[]) => new TextDecoder().decode(new Uint8Array(ids.flatMap((id) => bytes[id]!)));
    // Prefix decoding (main's way) counts the dangling byte as a replacement character.
    expect(tokenEndsByPrefixDecode([1, 2, 3, 4, 99], decode)).toEqual([1, 2, 2, 3, 3]);
  });
});
