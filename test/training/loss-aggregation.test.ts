/**
 * The update trains the objective its config names, whatever the micro-batch split:
 * a mini-batch's gradient under every loss_agg_mode is the same for micro-batches of 1, 2,
 * all rows and token-budget packing, and equals the gradient of a hand-derived objective;
 * the KL loss's coefficient is applied once (its gradient is linear in the coefficient).
 *
 * On-policy (old = current log-probs) and unclipped, vanilla PPO's loss has
 * ∂loss/∂logπ_j = −A_j·w_j, w_j the mode's weight of token j. On the 3-row example below
 * (masked tokens per row n = 4, 2, 4; N = 10 tokens; G = 3 rows; L = tokenSumNorm = 6):
 *   token-mean               w = 1/N = 1/10
 *   seq-mean-token-mean      w = 1/(G·n_b) = 1/12, 1/6, 1/12
 *   seq-mean-token-sum       w = 1/G = 1/3
 *   seq-mean-token-sum-norm  w = 1/(G·L) = 1/18
 * so the reference gradient is that of Σ_j −A_j·w_j·logπ_j over one forward of all rows.
 */
import { afterAll, describe, expect, test } from "bun:test";
import { join } from "node:path";
import * as torch from "../../src/torch/index.ts";
import { Qwen25VLChatModel } from "../../src/models/index.ts";
import { Rng } from "../../src/core/rng.ts";
import type { LossAggMode } from "../../src/algorithms/index.ts";
import { TrainingModel, policyForward, valueForward } from "../../src/training/forward.ts";
import { ParameterOptimizer, updateActor, updateCritic, type ActorUpdateOptions } from "../../src/training/update.ts";
import { StepBatch } from "../../src/training/step-batch.ts";
import { handRow } from "./rows.ts";

const FIXTURE = join(import.meta.dir, "../fixtures/qwen2_5_vl_tiny");
const L = 6;

const rows = [
  handRow({ uid: "a", prompt: [10, 11, 12], response: [20, 21, 22, 362], reward: 1 }),
  handRow({ uid: "a", traj: 1, prompt: [10, 11], response: [23, 362], reward: 0 }),
  handRow({ uid: "b", prompt: [13, 14, 15, 16], response: [24, 25, 26, 27, 362], mask: [1, 1, 0, 1, 1], reward: 1 }),
];
/** Advantages per row and token (nonzero at masked-out positions too: the mask must drop them). */
const ADV = [
  [0.5, -1, 2, 0.25],
  [-1.5, 0.75],
  [1, -0.5, 9, 0.3, -2],
];
const tokenWeights: Record<LossAggMode, (b: number) => number> = {
  "token-mean": () => 1 / 10,
  "seq-mean-token-mean": (b) => 1 / (3 * [4, 2, 4][b]!),
  "seq-mean-token-sum": () => 1 / 3,
  "seq-mean-token-sum-norm": () => 1 / (3 * L),
};

const model = new TrainingModel(Qwen25VLChatModel.load(FIXTURE, { device: "cpu", dtype: "f32" }));
afterAll(() => model.family.dispose());

/** An optimizer that records the gradient of each mini-batch instead of stepping. */
class GradientRecorder extends ParameterOptimizer {
  grads: Float64Array[] = [];
  override step(): { gradNorm: number; skipped: boolean } {
    this.grads.push(flatGrad(this.params));
    this.zeroGrad();
    return { gradNorm: 0, skipped: false };
  }
}

function flatGrad(params: readonly torch.Tensor[]): Float64Array {
  const parts = params.map((p) => (p.grad ? Float64Array.from(p.grad.toFloat32Array()) : new Float64Array(p.numel())));
  const out = new Float64Array(parts.reduce((n, p) => n + p.length, 0));
  let at = 0;
  for (const p of parts) {
    out.set(p, at);
    at += p.length;
  }
  return out;
}

function recorder(named: Map<string, torch.Tensor> = model.weights): GradientRecorder {
  return new GradientRecorder(named, { lr: 1e-3, weightDecay: 0, betas: [0.9, 0.999], eps: 1e-8, warmupSteps: 0, style: "constant", minLrRatio: 0, totalSteps: 10 });
}

function relativeError(a: Float64Array, b: Float64Array): number {
  let diff = 0;
  let norm = 0;
  for (let i = 0; i < a.length; i++) {
    diff += (a[i]! - b[i]!) ** 2;
    norm += b[i]! ** 2;
  }
  return Math.sqrt(diff / norm);
}

function options(over: Partial<ActorUpdateOptions>): ActorUpdateOptions {
  return {
    miniBatches: 1, microBatchSize: 3, epochs: 1, shuffle: false, temperature: 1, chunkTokens: 1024, lossMode: "vanilla",
    lossAggMode: "token-mean", tokenSumNorm: L, clipRatio: 0.2, clipRatioC: 3, entropyCoeff: 0, gradClip: 1e9, ...over,
  };
}

function batch(advantages: number[][] = ADV): StepBatch {
  const b = StepBatch.fromRows(rows, "cpu");
  b.set("oldLogprobs", torch.noGrad(() => policyForward(model, rows, { temperature: 1, chunkTokens: 64, withEntropy: false }).logProbs));
  b.set("advantages", b.tensorOf(advantages));
  return b;
}

/** The gradient of Σ_j c_j·logπ_j over one forward of all rows (c_j = 0 off the mask). */
function referenceGradient(coefficient: (b: number, j: number) => number): Float64Array {
  const opt = recorder();
  torch.tidy(() => {
    const lp = policyForward(model, rows, { temperature: 1, chunkTokens: 64, withEntropy: false }).logProbs;
    const c = torch.tensor(Float64Array.from(rows.flatMap((r, b) => Array.from({ length: lp.shape[1]! }, (_, j) => (j < r.responseIds.length && r.responseMask[j] === 1 ? coefficient(b, j) : 0)))), lp.shape, { dtype: "f32" });
    lp.mul(c).sum().backward();
  });
  const g = flatGrad(opt.params);
  opt.zeroGrad();
  opt.dispose();
  return g;
}

const splits: [string, Partial<ActorUpdateOptions>][] = [
  ["micro-batches of 1", { microBatchSize: 1 }],
  ["micro-batches of 2", { microBatchSize: 2 }],
  ["all rows at once", { microBatchSize: 3 }],
  ["a token budget", { microBatchSize: 1, maxTokens: 16 }],
];

describe("loss aggregation over a mini-batch", () => {
  for (const mode of Object.keys(tokenWeights) as LossAggMode[]) {
    test(`${mode}: every split gives the hand-derived gradient`, async () => {
      const want = referenceGradient((b, j) => -ADV[b]![j]! * tokenWeights[mode](b));
      for (const [, split] of splits) {
        const opt = recorder();
        using b = batch();
        const metrics = await updateActor(model, opt, b, options({ lossAggMode: mode, ...split }), new Rng(0));
        expect(opt.grads.length).toBe(1);
        expect(relativeError(opt.grads[0]!, want)).toBeLessThan(1e-6);
        // the logged loss is the mini-batch's: Σ_j −A_j·w_j at ratio 1
        const loss = rows.reduce((s, r, bi) => s + r.responseMask.reduce((t, m, j) => t + (m ? -ADV[bi]![j]! * tokenWeights[mode](bi) : 0), 0), 0);
        expect(metrics["actor/pg_loss"]!).toBeCloseTo(loss, 5);
        opt.dispose();
      }
    });
  }

  test("the token budget really splits the mini-batch", async () => {
    const { microBatchPlan } = await import("../../src/training/update.ts");
    expect(microBatchPlan([0, 1, 2], rows, { microBatchSize: 1, maxTokens: 16 }).length).toBeGreaterThan(1);
  });
});

describe("KL loss", () => {
  for (const coef of [0.001, 0.1, 0.2]) {
    test(`coefficient ${coef} is applied once`, async () => {
      // With zero advantages only the KL term has a gradient. k1 against a reference that
      // differs by 0.3 everywhere: kl_j = logπ_j − ref_j, token-mean -> ∂/∂logπ_j = coef / N.
      const opt = recorder();
      using b = batch(rows.map((r) => r.responseIds.map(() => 0)));
      b.set("refLogprobs", torch.tidy(() => b.get("oldLogprobs").sub(0.3)));
      const metrics = await updateActor(model, opt, b, options({ microBatchSize: 1, klLoss: { coef, type: "kl" } }), new Rng(0));
      const want = referenceGradient(() => coef / 10);
      expect(relativeError(opt.grads[0]!, want)).toBeLessThan(1e-6);
      expect(metrics["actor/kl_coef"]!).toBeCloseTo(coef, 6);
      expect(metrics["actor/kl_loss"]!).toBeCloseTo(0.3, 5);
      opt.dispose();
    });
  }
});

describe("value loss aggregation", () => {
  test("the critic's gradient does not depend on the micro-batch split", async () => {
    const head = model.newValueHead(3);
    const named = new Map<string, torch.Tensor>(model.weights);
    named.delete("lm_head.weight");
    for (const [k, t] of head.entries()) named.set(k, t);
    for (const mode of Object.keys(tokenWeights) as LossAggMode[]) {
      const grads: Float64Array[] = [];
      for (const [, split] of splits) {
        const opt = recorder(named);
        using b = StepBatch.fromRows(rows, "cpu");
        b.set("values", torch.noGrad(() => valueForward(model, head, rows)));
        b.set("returns", b.tensorOf(ADV));
        await updateCritic(model, head, opt, b, { miniBatches: 1, microBatchSize: 3, epochs: 1, shuffle: false, cliprangeValue: 100, lossAggMode: mode, tokenSumNorm: L, gradClip: 1e9, ...split }, new Rng(0));
        grads.push(opt.grads[0]!);
        opt.zeroGrad();
        for (const p of opt.params) p.requiresGrad_(true);
      }
      for (const g of grads.slice(1)) expect(relativeError(g, grads[0]!)).toBeLessThan(1e-6);
    }
    for (const [, t] of head.entries()) t.dispose();
  });
});
