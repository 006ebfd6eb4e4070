/**
 * vagen's float64 losses against an independent numpy implementation of the same formulas
 * (test/fixtures/algorithms/losses/make_reference.py, which imports no vagen code), to 1e-6:
 * every aggregation mode, every policy-loss mode (with and without rollout IS weights and
 * several clip settings), the value loss, every KL kind, token log-probs / entropy, and TIS.
 */
import { describe, expect, test } from "bun:test";
import { torch, expectClose, values, noLeak } from "../torch/helpers.ts";
import { aggregateLoss, type LossAggMode } from "../../src/algorithms/aggregate.ts";
import { policyLoss, type PolicyLossMode, type PolicyLossOptions } from "../../src/algorithms/policy-loss.ts";
import { valueLoss, type ValueLossOptions } from "../../src/algorithms/value-loss.ts";
import { klPenalty, type KlPenalty } from "../../src/algorithms/kl.ts";
import { tokenLogProbs } from "../../src/algorithms/entropy.ts";
import { rolloutCorrection } from "../../src/algorithms/mismatch.ts";
import { readMetrics } from "../../src/algorithms/metrics.ts";

type Grid = number[][];
interface Reference {
  aggregate: { mode: LossAggMode; lossMat: Grid; mask: Grid; expected: number }[];
  policy: { mode: PolicyLossMode; options: PolicyLossOptions; inputs: Record<string, Grid>; loss: number; metrics: Record<string, number> }[];
  value: { options: ValueLossOptions; inputs: Record<"vpreds" | "values" | "returns" | "valueMask", Grid>; loss: number; metrics: Record<string, number> }[];
  kl: { kind: KlPenalty; logProb: Grid; refLogProb: Grid; expected: Grid }[];
  logprobs: { temperature: number; logits: number[][][]; tokens: Grid; logProbs: Grid; entropy: Grid }[];
  tis: { cap: number; oldLogProb: Grid; rolloutLogProb: Grid; responseMask: Grid; weights: Grid; metrics: Record<string, number> }[];
}

const reference = (await Bun.file(new URL("../fixtures/algorithms/losses/reference.json", import.meta.url)).json()) as Reference;
const f64 = (data: unknown) => torch.tensor(data as number[][], undefined, { dtype: "f64" });
const TOL = 1e-6;

function expectMetrics(actual: Record<string, number>, expected: Record<string, number>): void {
  expect(Object.keys(actual).sort()).toEqual(Object.keys(expected).sort());
  for (const [name, want] of Object.entries(expected)) {
    try {
      expectClose(actual[name]!, want, TOL, TOL);
    } catch (err) {
      throw new Error(`${name}: ${(err as Error).message}`);
    }
  }
}

describe("reference: aggregation", () => {
  for (const c of reference.aggregate) {
    test(c.mode, () => noLeak(() => expectClose(aggregateLoss(f64(c.lossMat), f64(c.mask), c.mode).item(), c.expected, TOL, TOL)));
  }
});

describe("reference: policy losses", () => {
  reference.policy.forEach((c, i) => {
    const label = `${i}: ${c.mode} ${JSON.stringify(c.options)}${c.inputs.rolloutIsWeights ? " with IS weights" : ""}`;
    test(label, () =>
      noLeak(() => {
        const { loss, metrics } = policyLoss(
          c.mode,
          {
            logProb: f64(c.inputs.logProb),
            oldLogProb: f64(c.inputs.oldLogProb),
            advantages: f64(c.inputs.advantages),
            responseMask: f64(c.inputs.responseMask),
            turnIds: c.inputs.turnIds ? torch.tensor(c.inputs.turnIds, undefined, { dtype: "i64" }) : undefined,
            rolloutIsWeights: c.inputs.rolloutIsWeights ? f64(c.inputs.rolloutIsWeights) : undefined,
          },
          c.options,
        );
        expectClose(loss.item(), c.loss, TOL, TOL);
        expectMetrics(readMetrics(metrics), c.metrics);
      }));
  });
});

describe("reference: value loss", () => {
  reference.value.forEach((c, i) => {
    test(`${i}: ${JSON.stringify(c.options)}`, () =>
      noLeak(() => {
        const { loss, metrics } = valueLoss(
          { vpreds: f64(c.inputs.vpreds), values: f64(c.inputs.values), returns: f64(c.inputs.returns), valueMask: f64(c.inputs.valueMask) },
          c.options,
        );
        expectClose(loss.item(), c.loss, TOL, TOL);
        expectMetrics(readMetrics(metrics), c.metrics);
      }));
  });
});

describe("reference: KL", () => {
  for (const c of reference.kl) {
    test(c.kind, () =>
      noLeak(() => {
        const kl = klPenalty(f64(c.logProb), f64(c.refLogProb), c.kind);
        expectClose(values(kl), c.expected.flat(), TOL, TOL);
      }));
  }
});

describe("reference: token log-probs and entropy", () => {
  for (const c of reference.logprobs) {
    test(`temperature ${c.temperature}`, () =>
      noLeak(() => {
        const r = tokenLogProbs(f64(c.logits), torch.tensor(c.tokens, undefined, { dtype: "i64" }), { temperature: c.temperature, chunkTokens: 3 });
        expectClose(values(r.logProbs), c.logProbs.flat(), TOL, TOL);
        expectClose(values(r.entropy!), c.entropy.flat(), TOL, TOL);
      }));
  }
});

describe("reference: truncated importance sampling", () => {
  for (const c of reference.tis) {
    test(`cap ${c.cap}`, () =>
      noLeak(() => {
        const r = rolloutCorrection(f64(c.oldLogProb), f64(c.rolloutLogProb), f64(c.responseMask), { is: "token", isThreshold: c.cap, rs: null, rsThreshold: 2 });
        expectClose(values(r.weights), c.weights.flat(), TOL, TOL);
        expectMetrics(readMetrics(r.metrics), c.metrics);
      }));
  }
});
