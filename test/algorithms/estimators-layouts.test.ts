/**
 * Row layouts and edge cases: the same episodes packed as concat rows (one per episode)
 * and as split rows (one per turn, shuffled, with a padding duplicate) give the same
 * numbers at every model token; empty masks, all-zero rewards, truncated rows and
 * padding duplicates behave.
 */
import { describe, expect, test } from "bun:test";
import * as torch from "../../src/torch/index.ts";
import * as alg from "../../src/algorithms/index.ts";
import { expectClose } from "../torch/helpers.ts";

const f64 = { dtype: "f64" as const };
// + 0 turns -0 (a zero times a negative) into 0 for toEqual.
const flat = (t: torch.Tensor) => Array.from(t.toFloat64Array(), (x) => x + 0);

/** Episodes as turns of (reward, value) tokens, with a group and a state key per turn. */
interface Episode {
  group: string;
  turns: [number, number][][];
  states: string[];
}
const EPISODES: Episode[] = [
  { group: "a", turns: [[[0, 0.2], [0.5, -0.1]], [[0.1, 0.3], [0, 0.4], [1, 0.05]]], states: ["s0", "s1"] },
  { group: "a", turns: [[[0.25, 0.1]], [[0, -0.3], [-0.5, 0.2]], [[2, 0.6]]], states: ["s0", "s2", "s1"] },
  { group: "b", turns: [[[0, 0.7], [1.5, 0.9]]], states: ["s0"] },
  { group: "b", turns: [[[0.3, 0.1]], [[0, 0.2]]], states: ["s3", "s0"] },
];

interface Built {
  batch: alg.AdvantageBatch;
  /** flat [B * T] position of each (episode, turn, token), in episode order */
  positions: number[];
}

/** Concat: one row per episode, a 1-token observation between turns, right padding. */
function concatLayout(episodes: Episode[]): Built {
  const width = Math.max(...episodes.map((e) => e.turns.reduce((n, t) => n + t.length + 1, 0))) + 1;
  const rewards: number[][] = [], values: number[][] = [], mask: number[][] = [];
  const positions: number[] = [];
  episodes.forEach((episode, b) => {
    const r = new Array(width).fill(0), v = new Array(width).fill(0), m = new Array(width).fill(0);
    let p = 0;
    episode.turns.forEach((turn, t) => {
      if (t > 0) { r[p] = 9; v[p] = 9; p++; } // observation: its reward and value must be ignored
      for (const [reward, value] of turn) { r[p] = reward; v[p] = value; m[p] = 1; positions.push(b * width + p); p++; }
    });
    rewards.push(r); values.push(v); mask.push(m);
  });
  return {
    batch: {
      tokenLevelRewards: torch.tensor(rewards, undefined, f64), values: torch.tensor(values, undefined, f64), responseMask: torch.tensor(mask, undefined, f64),
      groupIds: episodes.map((e) => e.group), trajIndex: episodes.map((_, i) => i), stateKeys: episodes.map((e) => e.states),
    },
    positions,
  };
}

/** Split: one row per turn with a 1-token prompt, rows in a scrambled order, row 0 duplicated at the end. */
function splitLayout(episodes: Episode[]): Built {
  const turnRows = episodes.flatMap((e, ei) => e.turns.map((turn, t) => ({ ei, t, turn, group: e.group, state: e.states[t]! })));
  const order = turnRows.map((_, i) => (i * 5) % turnRows.length); // 5 is coprime with the row count
  const rows = order.map((i) => turnRows[i]!);
  rows.push(rows[0]!);
  const width = Math.max(...rows.map((r) => r.turn.length)) + 2;
  const rewards = rows.map((r) => [7, ...r.turn.map(([x]) => x), ...new Array(width - 1 - r.turn.length).fill(0)]);
  const values = rows.map((r) => [7, ...r.turn.map(([, x]) => x), ...new Array(width - 1 - r.turn.length).fill(0)]);
  const mask = rows.map((r) => [0, ...r.turn.map(() => 1), ...new Array(width - 1 - r.turn.length).fill(0)]);
  const positions: number[] = [];
  episodes.forEach((e, ei) => e.turns.forEach((turn, t) => {
    const b = rows.findIndex((r) => r.ei === ei && r.t === t);
    turn.forEach((_, k) => positions.push(b * width + 1 + k));
  }));
  expect(new Set(order).size).toBe(turnRows.length);
  return {
    batch: {
      tokenLevelRewards: torch.tensor(rewards, undefined, f64), values: torch.tensor(values, undefined, f64), responseMask: torch.tensor(mask, undefined, f64),
      groupIds: rows.map((r) => r.group), episodeIds: rows.map((r) => `ep${r.ei}`), turnIndex: rows.map((r) => r.t), stateKeys: rows.map((r) => [r.state]),
    },
    positions,
  };
}

const at = (t: torch.Tensor, positions: number[]) => { const all = t.toFloat64Array(); return positions.map((p) => all[p]!); };

const STITCHING = alg.estimatorNames().filter((name) => alg.getEstimator(name).spansRows);

describe("concat and split layouts give identical advantages", () => {
  for (const name of STITCHING) {
    test(name, () => {
      const before = torch.liveTensors();
      torch.tidy(() => {
        const resolved = alg.validateEstimatorSetup({ estimator: name, useCritic: true, splitsEpisodeAcrossRows: true, params: { gamma: name === "bi_level_gae" ? 1 : 0.9, lam: 0.8 } });
        const concat = concatLayout(EPISODES);
        const split = splitLayout(EPISODES);
        const a = alg.computeAdvantages(resolved, concat.batch);
        const b = alg.computeAdvantages(resolved, split.batch);
        expectClose(at(b.advantages, split.positions), at(a.advantages, concat.positions), 1e-9, 0);
        expectClose(at(b.returns, split.positions), at(a.returns, concat.positions), 1e-9, 0);
        if (a.turnIds) expect(at(b.turnIds!, split.positions)).toEqual(at(a.turnIds, concat.positions));
        if (a.valueMask) expect(at(b.valueMask!, split.positions)).toEqual(at(a.valueMask, concat.positions));
        // The padding duplicate (last row) repeats its source row (row 0).
        const rows = b.advantages.size(0);
        expect(flat(b.advantages.select(0, rows - 1))).toEqual(flat(b.advantages.select(0, 0)));
      });
      expect(torch.liveTensors()).toBe(before);
    });
  }
});

describe("edge cases", () => {
  const ALL = alg.estimatorNames();
  const run = (name: string, batch: alg.AdvantageBatch) =>
    alg.computeAdvantages(alg.validateEstimatorSetup({ estimator: name, useCritic: true, splitsEpisodeAcrossRows: false, params: { gamma: 1 } }), batch);

  test("empty masks: every estimator returns zero advantages without throwing", () => torch.tidy(() => {
    const batch: alg.AdvantageBatch = {
      tokenLevelRewards: torch.tensor([[1, 2, 3], [0, 1, 0]], undefined, f64),
      responseMask: torch.zeros([2, 3], f64),
      values: torch.tensor([[0.5, 0.5, 0.5], [1, 1, 1]], undefined, f64),
      groupIds: ["g", "g"],
      stateKeys: [[], []],
    };
    // verl's grpo and rloo sum whole rows as verl does, but multiply by the (empty) mask.
    for (const name of ALL) expect(flat(run(name, batch).advantages)).toEqual([0, 0, 0, 0, 0, 0]);
  }));

  test("an empty row among others contributes nothing and changes nothing", () => torch.tidy(() => {
    const base = { groupIds: ["g"], tokenLevelRewards: torch.tensor([[0, 1, 2]], undefined, f64), responseMask: torch.tensor([[1, 1, 1]], undefined, f64), values: torch.tensor([[0.1, 0.2, 0.3]], undefined, f64) };
    const withEmpty = { groupIds: ["g", "h"], tokenLevelRewards: torch.tensor([[0, 1, 2], [5, 5, 5]], undefined, f64), responseMask: torch.tensor([[1, 1, 1], [0, 0, 0]], undefined, f64), values: torch.tensor([[0.1, 0.2, 0.3], [1, 1, 1]], undefined, f64) };
    for (const name of ["default_gae", "token_level_gae", "turn_level_gae", "bi_level_gae", "bi_level_gae_paper"]) {
      const a = flat(run(name, base).advantages);
      expect(flat(run(name, withEmpty).advantages)).toEqual([...a, 0, 0, 0]);
    }
  }));

  test("all-zero rewards and values: every advantage is 0", () => torch.tidy(() => {
    const batch: alg.AdvantageBatch = {
      tokenLevelRewards: torch.zeros([3, 4], f64), values: torch.zeros([3, 4], f64),
      responseMask: torch.tensor([[1, 1, 0, 1], [1, 0, 0, 0], [0, 1, 1, 0]], undefined, f64),
      groupIds: ["g", "g", "h"], stateKeys: [["s", "t"], ["s"], ["u"]],
    };
    for (const name of ALL) expect(flat(run(name, batch).advantages)).toEqual(new Array(12).fill(0));
  }));

  test("a truncated row (mask to the last column) is not bootstrapped: the recursion starts from 0", () => torch.tidy(() => {
    // r = [0, 0, 1], V = [0, 0, 5], gamma = lam = 1: A2 = 1 - 5 = -4, R2 = 1; R1 = R0 = 1
    const batch: alg.AdvantageBatch = {
      tokenLevelRewards: torch.tensor([[0, 0, 1]], undefined, f64), values: torch.tensor([[0, 0, 5]], undefined, f64),
      responseMask: torch.tensor([[1, 1, 1]], undefined, f64), groupIds: ["g"],
    };
    expectClose(flat(alg.tokenLevelGae(batch, { gamma: 1, lam: 1 }).returns), [1, 1, 1], 1e-12, 0);
  }));

  test("padding duplicates receive their source's outputs and leave the whitening statistics alone", () => torch.tidy(() => {
    const rows = { rewards: [[0, 1, 0], [2, 0, 0]], mask: [[1, 1, 0], [1, 0, 0]], values: [[0.3, 0.1, 0], [0.2, 0, 0]] };
    const make = (extra: boolean): alg.AdvantageBatch => ({
      tokenLevelRewards: torch.tensor(extra ? [...rows.rewards, rows.rewards[0]!] : rows.rewards, undefined, f64),
      responseMask: torch.tensor(extra ? [...rows.mask, rows.mask[0]!] : rows.mask, undefined, f64),
      values: torch.tensor(extra ? [...rows.values, rows.values[0]!] : rows.values, undefined, f64),
      groupIds: extra ? ["g", "g", "g"] : ["g", "g"],
      episodeIds: extra ? ["e0", "e1", "e0"] : ["e0", "e1"],
    });
    const plain = flat(alg.tokenLevelGae(make(false), { gamma: 1, lam: 1 }).advantages);
    const padded = flat(alg.tokenLevelGae(make(true), { gamma: 1, lam: 1 }).advantages);
    expect(padded).toEqual([...plain, ...plain.slice(0, 3)]);
  }));

  test("duplicates whose masks differ are refused", () => torch.tidy(() => {
    const batch: alg.AdvantageBatch = {
      tokenLevelRewards: torch.zeros([2, 2], f64), responseMask: torch.tensor([[1, 1], [1, 0]], undefined, f64),
      groupIds: ["g", "g"], episodeIds: ["e", "e"], turnIndex: [0, 0],
    };
    expect(() => alg.tokenLevelGae(batch, { gamma: 1, lam: 1 })).toThrow(/rows 0 and 1 share episode .* but their response masks differ/);
  }));

  test("observation gaps split turns; row seams split turns; turn ids count them", () => torch.tidy(() => {
    // episode e: row 0 (turn index 0) holds two turns split by a gap, row 1 (index 1) one more.
    const batch: alg.AdvantageBatch = {
      tokenLevelRewards: torch.zeros([2, 4], f64),
      responseMask: torch.tensor([[1, 0, 1, 1], [1, 1, 0, 0]], undefined, f64),
      groupIds: ["g", "g"], episodeIds: ["e", "e"], turnIndex: [0, 1],
    };
    expect(flat(alg.tokenLevelGae(batch, { gamma: 1, lam: 1 }).turnIds!)).toEqual([0, -1, 1, 1, 2, 2, -1, -1]);
  }));
});
