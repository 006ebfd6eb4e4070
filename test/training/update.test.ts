/**
 * The update step on hand-made rows and the tiny Qwen2.5-VL fixture: the packing shift,
 * micro-batching, gradient accumulation, and that the losses move the model the way they
 * should.
 */
import { afterAll, describe, expect, test } from "bun:test";
import { join } from "node:path";
import * as torch from "../../src/torch/index.ts";
import { Qwen25VLChatModel } from "../../src/models/index.ts";
import { Rng } from "../../src/core/rng.ts";
import { TrainingModel, packRows, policyForward, valueForward } from "../../src/training/forward.ts";
import { ParameterOptimizer, microBatchPlan, trainableWeights, miniBatchPlan, updateActor, updateCritic, type ActorUpdateOptions } from "../../src/training/update.ts";
import { StepBatch } from "../../src/training/step-batch.ts";
import type { TrainingRow } from "../../src/rollout/types.ts";
import { handRow } from "./rows.ts";

const FIXTURE = join(import.meta.dir, "../fixtures/qwen2_5_vl_tiny");

function load(): TrainingModel {
  return new TrainingModel(Qwen25VLChatModel.load(FIXTURE, { device: "cpu", dtype: "f32" }));
}

const rows = [
  handRow({ uid: "a", prompt: [10, 11, 12], response: [20, 21, 22, 362], reward: 1 }),
  handRow({ uid: "a", traj: 1, prompt: [10, 11, 12], response: [23, 362], reward: 0 }),
  handRow({ uid: "b", prompt: [13, 14], response: [24, 25, 26, 27, 362], mask: [1, 1, 0, 1, 1], reward: 1 }),
  handRow({ uid: "b", traj: 1, prompt: [13, 14], response: [28, 362], reward: 0 }),
];

const models: TrainingModel[] = [];
afterAll(() => {
  for (const m of models) m.family.dispose();
});

function actorOptions(over: Partial<ActorUpdateOptions> = {}): ActorUpdateOptions {
  return {
    miniBatches: 1, microBatchSize: 4, epochs: 1, shuffle: false, temperature: 1, chunkTokens: 1024, lossMode: "vanilla",
    lossAggMode: "token-mean", tokenSumNorm: 8, clipRatio: 0.2, clipRatioC: 3, entropyCoeff: 0, gradClip: 1e9, ...over,
  };
}

/** A step batch of `rows` with old log-probs from `model` and the given per-row advantages. */
function batchFor(model: TrainingModel, batchRows: readonly TrainingRow[], advantage: (r: TrainingRow, b: number) => number): StepBatch {
  const batch = StepBatch.fromRows(batchRows, "cpu");
  batch.set("oldLogprobs", torch.noGrad(() => policyForward(model, batchRows, { temperature: 1, chunkTokens: 64, withEntropy: false }).logProbs));
  batch.set("advantages", batch.tensorOf(batchRows.map((r, b) => r.responseIds.map(() => advantage(r, b)))));
  return batch;
}

function optimizerFor(model: TrainingModel, lr: number): ParameterOptimizer {
  return new ParameterOptimizer(model.weights, { lr, weightDecay: 0, betas: [0.9, 0.999], eps: 1e-8, warmupSteps: 0, style: "constant", minLrRatio: 0, totalSteps: 10 });
}

function host(t: torch.Tensor): number[][] {
  const [B, R] = t.shape as [number, number];
  const flat = Array.from(t.toFloat32Array());
  return Array.from({ length: B }, (_, b) => flat.slice(b * R, (b + 1) * R));
}

describe("training forward", () => {
  test("packing puts response token j at column P + j; padding does not change a row's log-probs", () => {
    const packed = packRows(rows.slice(0, 3), 0);
    expect(packed.promptWidth).toBe(3);
    expect(packed.responseWidth).toBe(5);
    expect(packed.inputIds[2]).toEqual([0, 13, 14, 24, 25, 26, 27, 362]);
    expect(packed.attentionMask[1]).toEqual([1, 1, 1, 1, 1, 0, 0, 0]);

    const model = load();
    models.push(model);
    torch.noGrad(() => {
      const batch = host(policyForward(model, rows, { temperature: 1, chunkTokens: 3, withEntropy: false }).logProbs);
      rows.forEach((row, b) => {
        const alone = host(policyForward(model, [row], { temperature: 1, chunkTokens: 64, withEntropy: false }).logProbs)[0]!;
        for (let j = 0; j < row.responseIds.length; j++) expect(batch[b]![j]!).toBeCloseTo(alone[j]!, 4);
        // log-probs are log-probabilities of real tokens
        for (let j = 0; j < row.responseIds.length; j++) expect(alone[j]!).toBeLessThan(0);
      });
    });
  });
});

describe("batching plans", () => {
  test("mini-batches split the rows evenly, shuffled by the seed", () => {
    expect(miniBatchPlan(8, 2, false, new Rng(1))).toEqual([[0, 1, 2, 3], [4, 5, 6, 7]]);
    const a = miniBatchPlan(8, 2, true, new Rng(7)).flat();
    expect([...a].sort()).toEqual([0, 1, 2, 3, 4, 5, 6, 7]);
    expect(miniBatchPlan(8, 2, true, new Rng(7)).flat()).toEqual(a);
  });

  test("micro-batches by count and by a token budget", () => {
    expect(microBatchPlan([0, 1, 2, 3], rows, { microBatchSize: 3 })).toEqual([[0, 1, 2], [3]]);
    // padded size = rows x (max prompt + max response): [0,1] -> 2 x 7 = 14 <= 14; adding 2 -> 3 x 8 > 14
    expect(microBatchPlan([0, 1, 2, 3], rows, { microBatchSize: 1, maxTokens: 14 })).toEqual([[0, 1], [2, 3]]);
    // a row larger than the budget goes alone
    expect(microBatchPlan([0, 2], rows, { microBatchSize: 1, maxTokens: 4 })).toEqual([[0], [2]]);
  });
});

describe("freeze_vision_tower", () => {
  test("the optimizer gets every weight but the vision encoder's, or all of them", () => {
    const model = load();
    models.push(model);
    const all = [...model.weights.keys()];
    const trained = [...trainableWeights(model.weights, model.family, true).keys()];
    const left = all.filter((name) => !trained.includes(name));
    expect(left.length).toBeGreaterThan(5);
    expect(left.every((name) => name.startsWith("visual."))).toBe(true);
    expect(all.filter((name) => name.startsWith("visual.")).sort()).toEqual(left.sort());
    expect(trained).toContain("lm_head.weight");
    expect(trainableWeights(model.weights, model.family, false)).toBe(model.weights);
  });
});

describe("actor and critic updates", () => {
  test("gradient accumulation over micro-batches equals one full batch", async () => {
    const results: number[][] = [];
    for (const micro of [4, 1]) {
      const model = load();
      const opt = optimizerFor(model, 1e-2);
      using batch = batchFor(model, rows, (r) => (r.episodeReward > 0 ? 1 : -1));
      await updateActor(model, opt, batch, actorOptions({ microBatchSize: micro, lossAggMode: "seq-mean-token-mean" }), new Rng(0));
      results.push(Array.from(model.weights.get("lm_head.weight")!.narrow(0, 20, 4).toFloat32Array()));
      opt.dispose();
      model.family.dispose();
    }
    const diff = Math.max(...results[0]!.map((x, i) => Math.abs(x - results[1]![i]!)));
    expect(diff).toBeLessThan(1e-5);
  });

  test("positive advantages raise a response's log-prob, negative ones lower it", async () => {
    const model = load();
    models.push(model);
    const opt = optimizerFor(model, 1e-2);
    const lp = () => torch.noGrad(() => host(policyForward(model, rows, { temperature: 1, chunkTokens: 64, withEntropy: false }).logProbs));
    const before = lp();
    using batch = batchFor(model, rows, (r) => (r.episodeReward > 0 ? 1 : -1));
    const metrics = await updateActor(model, opt, batch, actorOptions({ gradClip: 1 }), new Rng(0));
    const after = lp();
    const sum = (x: number[], row: number) => x.slice(0, rows[row]!.responseIds.length).reduce((s, v, j) => s + v * rows[row]!.responseMask[j]!, 0);
    expect(sum(after[0]!, 0)).toBeGreaterThan(sum(before[0]!, 0));
    expect(sum(after[1]!, 1)).toBeLessThan(sum(before[1]!, 1));
    // first mini-batch of an epoch is on-policy: ratio 1, nothing clipped, ppo_kl 0
    expect(metrics["actor/ppo_kl"]).toBeCloseTo(0, 6);
    expect(metrics["actor/pg_clipfrac"]).toBe(0);
    expect(metrics["actor/grad_norm"]).toBeGreaterThan(0);
    expect(metrics["actor/entropy"]).toBeGreaterThan(0);
    expect(metrics["actor/lr"]).toBeCloseTo(1e-2, 10);
    opt.dispose();
  });

  test("critic updates bring values toward the returns", async () => {
    const model = load();
    models.push(model);
    const head = model.newValueHead(3);
    const named = new Map<string, torch.Tensor>(model.weights);
    named.delete("lm_head.weight");
    for (const [k, t] of head.entries()) named.set(k, t);
    const opt = new ParameterOptimizer(named, { lr: 3e-2, weightDecay: 0, betas: [0.9, 0.999], eps: 1e-8, warmupSteps: 0, style: "constant", minLrRatio: 0, totalSteps: 10 });
    let firstLoss = 0;
    let lastLoss = 0;
    for (let i = 0; i < 20; i++) {
      using batch = StepBatch.fromRows(rows, "cpu");
      batch.set("returns", batch.tensorOf(rows.map((r) => r.responseIds.map(() => r.episodeReward))));
      batch.set("values", torch.noGrad(() => valueForward(model, head, rows)));
      const m = await updateCritic(model, head, opt, batch, { miniBatches: 1, microBatchSize: 2, epochs: 1, shuffle: false, cliprangeValue: 0.5, lossAggMode: "token-mean", tokenSumNorm: 8, gradClip: 1 }, new Rng(0));
      if (i === 0) firstLoss = m["critic/vf_loss"]!;
      lastLoss = m["critic/vf_loss"]!;
    }
    expect(lastLoss).toBeLessThan(firstLoss * 0.5);
    opt.dispose();
    for (const [, t] of head.entries()) t.dispose();
  });
});
