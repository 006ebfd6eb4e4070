/**
 * Every estimator on tiny inputs, with the arithmetic written out. Batches are float64
 * so the hand values hold to 1e-9; a last test runs the default float32 path.
 *
 * Layout used most: one concat row, mask [1, 1, 0, 1, 1]: turn 0 is tokens 0-1, an
 * observation sits at 2, turn 1 is tokens 3-4. Packed (model tokens only) it is
 * [t0, t1, t3, t4] with turn ends at t1 and t4.
 */
import { describe, expect, test } from "bun:test";
import * as torch from "../../src/torch/index.ts";
import * as alg from "../../src/algorithms/index.ts";
import { expectClose } from "../torch/helpers.ts";

const f64 = { dtype: "f64" as const };
const grid = (rows: number[][]) => torch.tensor(rows, undefined, f64);
const flat = (t: torch.Tensor) => Array.from(t.toFloat64Array());
const TWO_TURNS = [[1, 1, 0, 1, 1]];

function batch(rewards: number[][], mask: number[][], values?: number[][], groupIds?: string[]): alg.AdvantageBatch {
  return {
    tokenLevelRewards: grid(rewards),
    responseMask: grid(mask),
    ...(values ? { values: grid(values) } : {}),
    groupIds: groupIds ?? rewards.map(() => "g"),
  };
}

function inScope(fn: () => void): void {
  const before = torch.liveTensors();
  torch.tidy(fn);
  expect(torch.liveTensors()).toBe(before);
}

describe("building blocks", () => {
  test("backwardGae: r = [0, 0, 1], V = 0.5 everywhere, gamma 0.9, lambda 1", () => inScope(() => {
    // A2 = 1 - 0.5 = 0.5
    // A1 = (0 + 0.9 * 0.5 - 0.5) + 0.9 * 0.5 = -0.05 + 0.45 = 0.4
    // A0 = -0.05 + 0.9 * 0.4 = 0.31
    const a = alg.backwardGae(grid([[0, 0, 1]]), grid([[0.5, 0.5, 0.5]]), 0.9, 1);
    expectClose(flat(a), [0.31, 0.4, 0.5], 1e-12, 0);
  }));

  test("maskedWhiten: batch mean, unbiased variance, masked positions shifted too", () => inScope(() => {
    // selected [1, 2, 3]: mean 2, unbiased var ((1 + 0 + 1) / 2) = 1 -> [-1, 0, 1]; 100 -> 98
    const w = alg.maskedWhiten(grid([[1, 2, 3, 100]]), grid([[1, 1, 1, 0]]));
    expectClose(flat(w), [-1, 0, 1, 98], 1e-6, 0);
  }));
});

describe("VAGEN main's estimators", () => {
  test("default_gae lumps the episode's reward at its last token; observation rewards are ignored", () => inScope(() => {
    // rewards [0, 0.5, (7 on the observation: ignored), 0, 1] -> total 1.5 at t4.
    // gamma 0.5, V = 0: packed returns are 1.5 * 0.5^(3 - j) = [0.1875, 0.375, 0.75, 1.5];
    // the observation gap costs no discount (t1 -> t3 is one packed step).
    const out = alg.defaultGae(batch([[0, 0.5, 7, 0, 1]], TWO_TURNS), { gamma: 0.5, lam: 1 });
    expectClose(flat(out.returns), [0.1875, 0.375, 0, 0.75, 1.5], 1e-12, 0);
    expect(flat(out.turnIds!)).toEqual([0, 0, -1, 1, 1]);
  }));

  test("token_level_gae keeps rewards where they were placed", () => inScope(() => {
    // packed r = [0, 0.5, 0, 1], gamma 0.5: R = [0.375, 0.75, 0.5, 1]
    const out = alg.tokenLevelGae(batch([[0, 0.5, 7, 0, 1]], TWO_TURNS), { gamma: 0.5, lam: 1 });
    expectClose(flat(out.returns), [0.375, 0.75, 0, 0.5, 1], 1e-12, 0);
    // Advantages are the same numbers (V = 0), whitened over the 4 model tokens:
    // mean 0.65625, unbiased std 0.26717..., and 0 on the observation.
    const a = [0.375, 0.75, 0.5, 1];
    const mean = a.reduce((x, y) => x + y) / 4;
    const std = Math.sqrt(a.reduce((s, x) => s + (x - mean) ** 2, 0) / 3);
    expectClose(flat(out.advantages), [(0.375 - mean) / std, (0.75 - mean) / std, 0, (0.5 - mean) / std, (1 - mean) / std], 1e-6, 0);
  }));

  test("turn_level_gae: per-turn GAE, value at the turn's first token, critic only at turn starts", () => inScope(() => {
    // turn 0: R = 0 + 1 = 1, V = V(t0) = 0.5;  turn 1: R = 0 + 2 = 2, V = V(t3) = 0.3
    // gamma 0.9, lam 1: A1 = 2 - 0.3 = 1.7;  A0 = 1 + 0.9 * 0.3 - 0.5 + 0.9 * 1.7 = 2.3
    // returns at turn starts: A0 + 0.5 = 2.8 and A1 + 0.3 = 2.0; -100 elsewhere.
    const out = alg.turnLevelGae(batch([[0, 1, 0, 0, 2]], TWO_TURNS, [[0.5, 0.1, 0, 0.3, 0.2]]), { gamma: 0.9, lam: 1, ignoreReturn: -100 });
    expectClose(flat(out.returns), [2.8, -100, -100, 2.0, -100], 1e-12, 0);
    expect(flat(out.valueMask!)).toEqual([1, 0, 0, 1, 0]);
    // advantages [2.3, 2.3, 1.7, 1.7] whitened: mean 2, unbiased var 4 * 0.09 / 3 = 0.12
    const z = 0.3 / Math.sqrt(0.12);
    expectClose(flat(out.advantages), [z, z, 0, -z, -z], 1e-6, 0);
  }));

  test("bi_level_gae charges gamma_turn once per turn boundary; mix 0 and 1 give the two recursions", () => inScope(() => {
    // packed r = [0, 1, 0, 2], V = 0, boundaries after t1 and t4, lambdas 1.
    // mix 1 (A_BL), gamma_turn 0.5: A(t4) = 2; A(t3) = 2 (inside a turn: g = 1);
    //   A(t1) = 1 + 0.5 * 2 = 2 (crossing the boundary costs 0.5 once); A(t0) = 2.
    // mix 0 (A_TOK, gamma 1): turn 0 sees 1 + 2 = 3, turn 1 sees 2: [3, 3, 2, 2].
    // mix 0.5: A_TOK + 0.5 (A_BL - A_TOK) = [2.5, 2.5, 2, 2].
    const b = batch([[0, 1, 0, 0, 2]], TWO_TURNS, [[0, 0, 0, 0, 0]]);
    const run = (biLevelMix: number) => flat(alg.biLevelGae(b, { gammaTurn: 0.5, lambdaTurn: 1, lambdaToken: 1, biLevelMix }).returns);
    expectClose(run(1), [2, 2, 0, 2, 2], 1e-12, 0);
    expectClose(run(0), [3, 3, 0, 2, 2], 1e-12, 0);
    expectClose(run(0.5), [2.5, 2.5, 0, 2, 2], 1e-12, 0);
  }));

  test("bi_level_gae: a reward placed mid-turn sends credit only backward (main's pinned case)", () => inScope(() => {
    // one turn of 4 tokens, reward 1 at token 1, V = 0, lambda_token 1: returns [1, 1, 0, 0]
    const b = batch([[0, 1, 0, 0]], [[1, 1, 1, 1]], [[0, 0, 0, 0]]);
    const out = alg.biLevelGae(b, { gammaTurn: 0.95, lambdaTurn: 0.95, lambdaToken: 1, biLevelMix: 0.75 });
    expectClose(flat(out.returns), [1, 1, 0, 0], 1e-12, 0);
  }));

  test("trajectory_grpo: population std, one-member and flat groups get 0", () => inScope(() => {
    // group a: G = 1, 3 -> mean 2, population std 1 -> -1/(1 + 1e-6), +1/(1 + 1e-6)
    // group b: one member -> 0;  group c: 5, 5 (no spread) -> 0
    const rows = [[1, 0], [0, 3], [2, 0], [5, 0], [0, 5]];
    const out = alg.trajectoryGrpo(batch(rows, rows.map(() => [1, 1]), undefined, ["a", "a", "b", "c", "c"]), { normAdvByStd: true });
    const s = 1 / (1 + 1e-6);
    expectClose(flat(out.advantages), [-s, -s, s, s, 0, 0, 0, 0, 0, 0], 1e-12, 0);
    expect(out.returns).toBe(out.advantages);
    expect(out.turnIds).toBeUndefined();
    // without std: just centred
    const centred = alg.trajectoryGrpo(batch(rows, rows.map(() => [1, 1]), undefined, ["a", "a", "b", "c", "c"]), { normAdvByStd: false });
    expectClose(flat(centred.advantages), [-1, -1, 1, 1, 0, 0, 0, 0, 0, 0], 1e-12, 0);
  }));
});

describe("verl's estimators", () => {
  test("gae: observation tokens keep the state and carry the next advantage", () => inScope(() => {
    // mask [1, 0, 1], r = [0, 0, 1], V = [0.5, 9, 0.2], gamma = lam = 1
    // t2: delta = 1 - 0.2 = 0.8 -> A2 = 0.8, nextV = 0.2
    // t1 (observation): state kept -> A1 = 0.8
    // t0: delta = 0 + 0.2 - 0.5 = -0.3 -> A0 = -0.3 + 0.8 = 0.5
    // returns = A + V = [1.0, 9.8, 1.0]
    const out = alg.verlGae(batch([[0, 0, 1]], [[1, 0, 1]], [[0.5, 9, 0.2]]), { gamma: 1, lam: 1 });
    expectClose(flat(out.returns), [1.0, 9.8, 1.0], 1e-12, 0);
    // whitened over [0.5, 0.8]: mean 0.65, unbiased std 0.2121...; the observation is whitened too
    const std = Math.sqrt((0.15 ** 2 * 2) / 1);
    expectClose(flat(out.advantages), [-0.15 / std, 0.15 / std, 0.15 / std], 1e-6, 0);
  }));

  test("grpo: unbiased std, a one-row group keeps its score, epsilon 1e-6", () => inScope(() => {
    // group a: 1, 3 -> mean 2, unbiased std sqrt(2) -> -+1/(sqrt 2 + 1e-6)
    // group b: one row, score 2 -> mean 0, std 1 -> 2 / (1 + 1e-6);  group c: 5, 5 -> 0
    const rows = [[1, 0], [0, 3], [2, 0], [5, 0], [0, 5]];
    const mask = [[1, 1], [1, 1], [1, 0], [1, 1], [1, 1]];
    const out = alg.verlGrpo(batch(rows, mask, undefined, ["a", "a", "b", "c", "c"]), { normAdvByStd: true });
    const s = 1 / (Math.SQRT2 + 1e-6);
    expectClose(flat(out.advantages), [-s, -s, s, s, 2 / (1 + 1e-6), 0, 0, 0, 0, 0], 1e-12, 0);
  }));

  test("rloo: each row's baseline is the mean of the others in its group", () => inScope(() => {
    // group a: 1, 3, 5 -> 1 - (3 + 5)/2 = -3;  3 - (1 + 5)/2 = 0;  5 - (1 + 3)/2 = 3.  group b: one row -> 2
    const rows = [[1], [3], [5], [2]];
    const out = alg.rloo(batch(rows, rows.map(() => [1]), undefined, ["a", "a", "a", "b"]));
    expectClose(flat(out.advantages), [-3, 0, 3, 2], 1e-12, 0);
  }));
});

describe("the paper's estimators", () => {
  // Two turns, r = [0, 1, (obs), 0, 2], V = [0, 0.4, (obs), 0, 0.3]; turn ends t1 and t4.
  const rewards = [[0, 1, 0, 0, 2]];
  const values = [[0, 0.4, 0, 0, 0.3]];

  test("bi_level_gae_paper: turn pass with high_level_gamma, then a token pass restarting at turn ends", () => inScope(() => {
    // turn pass (gamma_h 0.5, lam 1) over the ends: A(e1) = 2 - 0.3 = 1.7
    //   A(e0) = 1 + 0.5 * 0.3 - 0.4 + 0.5 * 1.7 = 1.6;  R(e0) = 2.0, R(e1) = 2.0
    // token pass (gamma 1): t4 = R(e1) - 0.3 = 1.7; t3 = (0 + 0.3 - 0) + 1.7 = 2.0
    //   t1 restarts: R(e0) - 0.4 = 1.6; t0 = (0 + 0.4 - 0) + 1.6 = 2.0
    // returns = A + V = [2.0, 2.0, 0, 2.0, 2.0]
    const out = alg.biLevelGaePaper(batch(rewards, TWO_TURNS, values), { gamma: 1, lam: 1, highLevelGamma: 0.5 });
    expectClose(flat(out.returns), [2.0, 2.0, 0, 2.0, 2.0], 1e-12, 0);
  }));

  test("turn_wise_gae: every token gets its turn's A_e, critic at turn ends, whitened over turn ends", () => inScope(() => {
    // A(e0) = 1.6, A(e1) = 1.7 as above; returns R_e at the ends: [0, 2.0, 0, 0, 2.0]
    // whitened over the two ends: mean 1.65, unbiased std sqrt(0.005) -> -+0.7071
    const out = alg.turnWiseGae(batch(rewards, TWO_TURNS, values), { lam: 1, highLevelGamma: 0.5 });
    expectClose(flat(out.returns), [0, 2.0, 0, 0, 2.0], 1e-12, 0);
    expect(flat(out.valueMask!)).toEqual([0, 1, 0, 0, 1]);
    const z = 0.05 / Math.sqrt(0.005);
    expectClose(flat(out.advantages), [-z, -z, 0, z, z], 1e-6, 0);
  }));

  test("masked_gae equals token_level_gae", () => inScope(() => {
    const b = batch(rewards, TWO_TURNS, values);
    expectClose(flat(alg.maskedGae(b, { gamma: 0.9, lam: 0.8 }).advantages), flat(alg.tokenLevelGae(b, { gamma: 0.9, lam: 0.8 }).advantages), 0, 0);
  }));

  test("bi_level_gae_paper equals token_level_gae when gamma = high_level_gamma = lam = 1 and rewards sit at turn ends", () => inScope(() => {
    const b = batch([[0, 1, 5, 0, 2]], TWO_TURNS, [[0.1, 0.4, 3, -0.5, 0.3]]);
    expectClose(flat(alg.biLevelGaePaper(b, { gamma: 1, lam: 1, highLevelGamma: 1 }).returns), flat(alg.tokenLevelGae(b, { gamma: 1, lam: 1 }).returns), 1e-12, 0);
  }));

  test("bi_level_gae_paper, as the legacy code: a mid-turn reward stays out of the turn pass", () => inScope(() => {
    // r = [0.3, 1, (obs), -0.2, 2], gamma = gamma_h = lam = 1 (V cancels at lam 1).
    // turn pass reads end rewards only: R(e1) = 2, R(e0) = 1 + 2 = 3
    // token pass: t4 = 2, t3 = -0.2 + 2 = 1.8, t1 = 3, t0 = 0.3 + 3 = 3.3
    // (token_level_gae would give t0 = 0.3 + 1 - 0.2 + 2 = 3.1: the -0.2 reaches turn 0 there)
    const b = batch([[0.3, 1, 5, -0.2, 2]], TWO_TURNS, [[0.1, 0.4, 3, -0.5, 0.3]]);
    expectClose(flat(alg.biLevelGaePaper(b, { gamma: 1, lam: 1, highLevelGamma: 1 }).returns), [3.3, 3, 0, 1.8, 2], 1e-12, 0);
  }));
});

describe("gigpo", () => {
  test("episode advantage plus omega times the step advantage of identical anchor states", () => inScope(() => {
    // Two episodes of group g, two turns each (concat rows, mask [1, 0, 1]).
    //   episode A: turn rewards [0, 1], states [s0, s1];  episode B: [0, 0], states [s0, s2]
    // episode level: G = 1, 0 -> mean 0.5 -> A_E = +0.5, -0.5 (mean_norm)
    // step returns, gamma 0.5: A: [0 + 0.5 * 1, 1] = [0.5, 1];  B: [0, 0]
    // anchor groups: s0 = {0.5, 0} -> mean 0.25 -> +0.25, -0.25;  s1, s2 alone -> 0
    // A = A_E + 1 * A_S: episode A [0.75, 0.5], episode B [-0.75, -0.5]
    const b: alg.AdvantageBatch = {
      ...batch([[0, 0, 1], [0, 0, 0]], [[1, 0, 1], [1, 0, 1]], undefined, ["g", "g"]),
      stateKeys: [["s0", "s1"], ["s0", "s2"]],
    };
    const out = alg.gigpo(b, { gamma: 0.5, stepAdvantageWeight: 1, normalizeByStd: false });
    expectClose(flat(out.advantages), [0.75, 0, 0.5, -0.75, 0, -0.5], 1e-12, 0);
    // omega 2 doubles the step part: A turn 0 = 0.5 + 2 * 0.25 = 1.0
    const doubled = alg.gigpo(b, { gamma: 0.5, stepAdvantageWeight: 2, normalizeByStd: false });
    expectClose(flat(doubled.advantages), [1.0, 0, 0.5, -1.0, 0, -0.5], 1e-12, 0);
  }));

  test("refuses state keys that do not match the turns the mask shows", () => inScope(() => {
    const b: alg.AdvantageBatch = { ...batch([[0, 0, 1]], [[1, 0, 1]]), stateKeys: [["s0"]] };
    expect(() => alg.gigpo(b, { gamma: 1, stepAdvantageWeight: 1, normalizeByStd: false })).toThrow(/stateKeys\[0\] has 1 keys; expected 2/);
  }));
});

test("float32 by default: f32 in, f32 out, same numbers", () => inScope(() => {
  const b: alg.AdvantageBatch = {
    tokenLevelRewards: torch.tensor([[0, 0.5, 7, 0, 1]]),
    responseMask: torch.tensor([[1, 1, 0, 1, 1]]),
    values: torch.tensor([[0, 0, 0, 0, 0]]),
    groupIds: ["g"],
  };
  const out = alg.defaultGae(b, { gamma: 0.5, lam: 1 });
  expect(out.advantages.dtype).toBe("f32");
  expectClose(flat(out.returns), [0.1875, 0.375, 0, 0.75, 1.5], 1e-6, 0);
}));

test("an estimator called outside any scope leaves only its outputs alive", () => {
  const b = batch([[0, 1, 0, 0, 2]], TWO_TURNS, [[0.5, 0.1, 0, 0.3, 0.2]]);
  const before = torch.liveTensors();
  const out = alg.turnLevelGae(b, { gamma: 0.9, lam: 1, ignoreReturn: -100 });
  const outputs = [out.advantages, out.returns, out.valueMask!, out.turnIds!];
  expect(torch.liveTensors()).toBe(before + outputs.length);
  for (const t of [...outputs, b.tokenLevelRewards, b.responseMask, b.values!]) t.dispose();
});
