import { describe, expect, test } from "bun:test";
import type { StateRelation } from "../../envs/_common/types.ts";
import { exactMatchF1, sokobanPaperF1, sokobanPaperScore, TopKStringTracker } from "../../src/rewards/paper.ts";
import { groupedF1 } from "../../src/rewards/f1.ts";
import { parseYesNo } from "../../src/rewards/judge.ts";

const item = (object_id: string, v: StateRelation["vertical_relation"], h: StateRelation["horizontal_relation"]): StateRelation => ({
  object_id,
  vertical_relation: v,
  horizontal_relation: h,
});

describe("the paper's Sokoban F1 (v3)", () => {
  test("a pair counts only when both relations agree; 0.5 / 0.5 mix", () => {
    const gold = [item("target", "below", "right"), item("box", "below", "same")];
    // Target half right: no match under v3 (main's grouped F1 would give it 0.5).
    const pred = [item("target", "below", "left"), item("box", "below", "same")];
    expect(sokobanPaperF1(pred, gold)).toEqual({ target: 0, box: 1, score: 0.5 });
    expect(groupedF1(pred, gold, { target: 0.5, box: 0.5 })).toBeCloseTo(0.75, 12);
  });

  test("greedy exact matching: P = matches / |pred|, R = matches / |gold|", () => {
    const gold = [item("box", "above", "left"), item("box", "below", "left")];
    const pred = [item("box", "above", "left"), item("box", "above", "left"), item("box", "same", "same")];
    // One match (the duplicate cannot reuse the gold item): P = 1/3, R = 1/2, F1 = 0.4.
    expect(exactMatchF1(pred, gold)).toBeCloseTo(0.4, 12);
    expect(exactMatchF1([], [])).toBe(1);
    expect(exactMatchF1([], gold)).toBe(0);
  });
});

describe("repetition penalty", () => {
  test("the tracker ranks by count, ties by first appearance, within its capacity", () => {
    const tracker = new TopKStringTracker(3, 2);
    for (const text of ["a", "b", "a", "c"]) tracker.add(text);
    // counts a:2, b:1, c:1 -> top 2 = a, b (b seen before c).
    expect(tracker.isTopK("a")).toBe(true);
    expect(tracker.isTopK("b")).toBe(true);
    expect(tracker.isTopK("c")).toBe(false);
    // A fourth string evicts the least counted, oldest first (b).
    tracker.add("d");
    expect(tracker.isTopK("b")).toBe(false);
    expect(tracker.isTopK("c")).toBe(true);
  });

  test("-0.1 for a repeated text whose F1_target + F1_box < 0.7; the F1 score otherwise", () => {
    const gold = [item("target", "below", "right"), item("box", "below", "same")];
    const lazy = [item("box", "below", "same")]; // target 0, box 1: sum 1 >= 0.7, never penalised
    const wrong = [item("box", "above", "left")]; // sum 0
    const tracker = new TopKStringTracker(1000, 5);
    expect(sokobanPaperScore(lazy, gold, "the box is below", tracker)).toBe(0.5);
    expect(sokobanPaperScore(lazy, gold, "the box is below", tracker)).toBe(0.5);
    // The first time a text is seen it is in the top 5 of a near-empty tracker too: the
    // paper checks after counting, so a bad answer is penalised whenever it ranks.
    expect(sokobanPaperScore(wrong, gold, "the box is above", tracker)).toBe(-0.1);
    // Push "the box is above" out of the top 5 with five texts repeated more often.
    for (const text of ["t1", "t2", "t3", "t4", "t5"]) for (let i = 0; i < 3; i++) tracker.add(text);
    expect(sokobanPaperScore(wrong, gold, "a fresh wrong text", tracker)).toBe(0);
  });
});

describe("YES/NO verdicts (v1)", () => {
  test("YES is 1, NO is 0, anything else unparseable", () => {
    expect(parseYesNo("<think>matches</think><answer>YES</answer>")).toBe(1);
    expect(parseYesNo("<answer> no </answer>")).toBe(0);
    expect(parseYesNo("YES")).toBeNull();
    expect(parseYesNo("<answer>MAYBE</answer>")).toBeNull();
  });
});
