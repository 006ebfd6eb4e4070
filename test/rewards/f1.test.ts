import { describe, expect, test } from "bun:test";
import type { StateRelation } from "../../envs/_common/types.ts";
import { maxWeightAssignment } from "../../src/rewards/assignment.ts";
import { groupedF1, itemSimilarity, matchedF1, rescaleAboveChance } from "../../src/rewards/f1.ts";

type V = StateRelation["vertical_relation"];
type H = StateRelation["horizontal_relation"];
const item = (object_id: string, vertical_relation: V, horizontal_relation: H): StateRelation => ({ object_id, vertical_relation, horizontal_relation });
const SOKOBAN = { target: 0.5, box: 0.5 };
const FROZENLAKE = { target: 0.7, hole: 0.3 };

describe("item similarity", () => {
  test("counts agreeing, non-null axes over 2", () => {
    expect(itemSimilarity(item("box", "below", "left"), item("box", "below", "left"))).toBe(1);
    expect(itemSimilarity(item("box", "below", "right"), item("box", "below", "left"))).toBe(0.5);
    expect(itemSimilarity(item("box", "above", "right"), item("box", "below", "left"))).toBe(0);
    // A null states nothing, so it never agrees.
    expect(itemSimilarity(item("box", null, "left"), item("box", "same", "left"))).toBe(0.5);
    expect(itemSimilarity(item("box", null, null), item("box", "same", "same"))).toBe(0);
  });
});

describe("optimal assignment", () => {
  test("beats greedy: greedy pairs A with its first best and leaves B nothing", () => {
    // A=(above,left), B=(above,right) against g1=(above,right), g2=(below,left):
    // A-g1 0.5, A-g2 0.5, B-g1 1, B-g2 0. Greedy in order: A-g1 (0.5) + B-g2 (0) = 0.5;
    // optimal: A-g2 (0.5) + B-g1 (1) = 1.5.
    const { match, total } = maxWeightAssignment([
      [0.5, 0.5],
      [1, 0],
    ]);
    expect(total).toBe(1.5);
    expect(match).toEqual([1, 0]);
    const pred = [item("box", "above", "left"), item("box", "above", "right")];
    const gold = [item("box", "above", "right"), item("box", "below", "left")];
    // M = 1.5, P = R = 1.5 / 2 = 0.75, F1 = 0.75.
    expect(matchedF1(pred, gold)).toBeCloseTo(0.75, 12);
  });

  test("rectangular matrices, both ways; every row or column used at most once", () => {
    expect(maxWeightAssignment([[1, 0.5, 0]])).toEqual({ match: [0], total: 1 });
    expect(maxWeightAssignment([[0.5], [1], [0]])).toEqual({ match: [-1, 0, -1], total: 1 });
    expect(maxWeightAssignment([])).toEqual({ match: [], total: 0 });
    // Two rows both best with column 0: only one gets it.
    expect(maxWeightAssignment([
      [1, 0],
      [1, 0.5],
    ]).total).toBe(1.5);
  });

  test("agrees with brute force on random matrices", () => {
    let seed = 7;
    const rand = () => ((seed = (seed * 1103515245 + 12345) % 2 ** 31) / 2 ** 31);
    for (let trial = 0; trial < 200; trial++) {
      const rows = 1 + Math.floor(rand() * 5);
      const cols = 1 + Math.floor(rand() * 5);
      const w = Array.from({ length: rows }, () => Array.from({ length: cols }, () => [0, 0.5, 1][Math.floor(rand() * 3)]!));
      expect(maxWeightAssignment(w).total).toBeCloseTo(bruteForce(w), 12);
    }
  });
});

function bruteForce(w: number[][], row = 0, used = new Set<number>()): number {
  if (row === w.length) return 0;
  let best = bruteForce(w, row + 1, used); // leave this row unmatched
  for (let c = 0; c < w[0]!.length; c++) {
    if (used.has(c)) continue;
    used.add(c);
    best = Math.max(best, w[row]![c]! + bruteForce(w, row + 1, used));
    used.delete(c);
  }
  return best;
}

describe("grouped F1", () => {
  test("a hand-worked Sokoban description", () => {
    const gold = [item("target", "below", "right"), item("box", "below", "same"), item("box", "above", "left")];
    const pred = [item("target", "below", "left"), item("box", "below", "same"), item("box", "above", null)];
    // target: one pair at 0.5 -> P = R = 0.5 -> F1 0.5.
    // box: (below,same)-(below,same) 1 + (above,null)-(above,left) 0.5 = 1.5 -> P = R = 0.75 -> F1 0.75.
    // grouped: (0.5·0.5 + 0.5·0.75) / 1 = 0.625.
    expect(groupedF1(pred, gold, SOKOBAN)).toBeCloseTo(0.625, 12);
  });

  test("precision and recall differ when the counts differ", () => {
    // One correct box out of two predicted, against one gold box: M = 1, P = 0.5, R = 1, F1 = 2/3.
    const gold = [item("box", "below", "left")];
    const pred = [item("box", "below", "left"), item("box", "above", "right")];
    expect(groupedF1(pred, gold, { box: 1 })).toBeCloseTo(2 / 3, 12);
  });

  test("empty lists: both empty is 1; one side empty is 0 for that type", () => {
    expect(groupedF1([], [], SOKOBAN)).toBe(1);
    expect(matchedF1([], [])).toBe(1);
    expect(groupedF1([], [item("box", "below", "left")], SOKOBAN)).toBe(0);
    expect(groupedF1([item("box", "below", "left")], [], SOKOBAN)).toBe(0);
  });

  test("weights: types absent from both sides are skipped; a missed type costs its weight", () => {
    const target = item("target", "above", "same");
    // No holes anywhere: only the target counts, F1 1.
    expect(groupedF1([target], [target], FROZENLAKE)).toBe(1);
    // Two gold holes never mentioned: (0.7·1 + 0.3·0) / 1 = 0.7.
    expect(groupedF1([target], [target, item("hole", "below", "left"), item("hole", "same", "right")], FROZENLAKE)).toBeCloseTo(0.7, 12);
    // Invented holes cost the same.
    expect(groupedF1([target, item("hole", "below", "left")], [target], FROZENLAKE)).toBeCloseTo(0.7, 12);
    // Types outside the weights are ignored entirely.
    expect(groupedF1([target, item("player", "same", "same")], [target], FROZENLAKE)).toBe(1);
  });

  test("nulls state nothing", () => {
    expect(groupedF1([item("target", null, null)], [item("target", "above", "left")], FROZENLAKE)).toBe(0);
  });
});

describe("chance-floor rescale", () => {
  test("max(0, (f - base) / (1 - base)); base <= 0 leaves f", () => {
    expect(rescaleAboveChance(1, 0.334)).toBeCloseTo(1, 12);
    expect(rescaleAboveChance(0.334, 0.334)).toBe(0);
    expect(rescaleAboveChance(0.2, 0.334)).toBe(0);
    // (0.625 - 0.334) / 0.666 = 0.291 / 0.666
    expect(rescaleAboveChance(0.625, 0.334)).toBeCloseTo(0.291 / 0.666, 12);
    // Main's SR recipe floor: (0.75 - 0.625) / 0.375 = 1/3.
    expect(rescaleAboveChance(0.75, 0.625)).toBeCloseTo(1 / 3, 12);
    expect(rescaleAboveChance(0.4, 0)).toBe(0.4);
    expect(rescaleAboveChance(0.4, -1)).toBe(0.4);
  });
});
