/**
 * The step's phases over a StepBatch, on hand-made rows: the variance filter reads the
 * env's scores (not the KL-penalised rewards), the rollout correction adds its weights and
 * loss mask from the engine's log-probs, KL in the reward subtracts β·KL, and the batch's
 * select/counts are what the update normalises by.
 */
import { describe, expect, test } from "bun:test";
import * as torch from "../../src/torch/index.ts";
import { createKlController } from "../../src/algorithms/index.ts";
import type { TrainConfig } from "../../src/training/config.ts";
import { correctRollout, filterGroups, rewardsWithKl } from "../../src/training/phases.ts";
import { StepBatch } from "../../src/training/step-batch.ts";
import { handRow } from "./rows.ts";

/** The config keys the phases read, the rest left out. */
function config(over: { filter?: Partial<TrainConfig["filter"]>; algorithm?: Partial<TrainConfig["algorithm"]> } = {}): TrainConfig {
  return {
    filter: { enable: true, name: "reward_variance", filter_kwargs: { top_p: 0.9, topk: 0.5 }, ...over.filter },
    algorithm: {
      use_kl_in_reward: false,
      kl_penalty: "kl",
      rollout_correction: { rollout_is: "token", rollout_is_threshold: 2, rollout_rs: null, rollout_rs_threshold: 2, rollout_rs_threshold_lower: null },
      ...over.algorithm,
    },
  } as unknown as TrainConfig;
}

function rows() {
  // groups a (scores 1, 0: variance 0.25) and b (scores 1, 1: variance 0)
  return [
    handRow({ uid: "a", prompt: [1], response: [2, 3], reward: 1 }),
    handRow({ uid: "a", traj: 1, prompt: [1], response: [4], reward: 0 }),
    handRow({ uid: "b", prompt: [5], response: [6, 7, 8], reward: 1 }),
    handRow({ uid: "b", traj: 1, prompt: [5], response: [9], reward: 1 }),
  ];
}

const host = (t: torch.Tensor) => Array.from(t.toFloat32Array());

describe("StepBatch", () => {
  test("select keeps the rows' columns and narrows to their widest response; counts are over the mask", () => {
    using batch = StepBatch.fromRows(rows(), "cpu");
    expect(batch.width).toBe(3);
    expect(batch.tokenCount()).toBe(7);
    using part = batch.select([3, 1]);
    expect(part.width).toBe(1);
    expect(part.rows.map((r) => r.uid)).toEqual(["b", "a"]);
    expect(host(part.get("tokenScores"))).toEqual([1, 0]);
    expect([part.tokenCount(), part.rowCount()]).toEqual([2, 2]);
    expect(batch.rowSums("tokenScores")).toEqual([1, 0, 1, 1]);
    expect(() => batch.get("advantages")).toThrow(/no "advantages" column yet/);
    expect(() => batch.set("advantages", torch.zeros([4, 2]))).toThrow(/expected shape \[4, 3\]/);
  });

  test("a tensor set under two names is owned twice (GRPO returns its advantages as its returns)", () => {
    const before = torch.liveTensors();
    const batch = StepBatch.fromRows(rows(), "cpu");
    const advantages = batch.tensorOf([[1, 2], [3], [4, 5, 6], [7]]);
    batch.set("advantages", advantages);
    batch.set("returns", advantages);
    batch.set("advantages", batch.tensorOf([[0, 0], [0], [0, 0, 0], [0]]));
    expect(host(batch.get("returns"))).toEqual([1, 2, 0, 3, 0, 0, 4, 5, 6, 7, 0, 0]);
    batch.dispose();
    expect(torch.liveTensors()).toBe(before);
  });
});

describe("the variance filter", () => {
  test("reads the scores, not the rewards after the KL penalty", () => {
    using batch = StepBatch.fromRows(rows(), "cpu");
    // a penalty that would make group b vary and group a not
    batch.set("tokenRewards", batch.tensorOf([[0, 1], [1], [0, 0, 0], [1]]));
    batch.set("advantages", batch.tensorOf([[1, 1], [2], [3, 3, 3], [4]]));
    const { kept, metrics } = filterGroups(batch, config());
    expect(kept.rows.map((r) => r.uid)).toEqual(["a", "a"]);
    expect(metrics["filter/train/mean_variance"] ?? metrics[Object.keys(metrics)[0]!]).toBeDefined();
    kept.dispose();
  });

  test("top_p scales the kept rows' advantages by its loss scale", () => {
    using batch = StepBatch.fromRows(rows(), "cpu");
    batch.set("advantages", batch.tensorOf([[1, 1], [1], [1, 1, 1], [1]]));
    const { kept } = filterGroups(batch, config({ filter: { name: "reward_variance_top_p", filter_kwargs: { top_p: 0.5, topk: 0.2 } } }));
    expect(kept.size).toBeGreaterThan(0);
    const scaled = host(kept.get("advantages"))[0]!;
    expect(scaled).toBeGreaterThan(0);
    kept.dispose();
  });
});

describe("rollout correction in the step", () => {
  function withLogprobs() {
    const r = rows().map((row) => ({ ...row, logprobsComplete: true }));
    r[0]!.rolloutLogprobs = [-1, -2];
    const batch = StepBatch.fromRows(r, "cpu");
    // old − rollout on row 0: [0, 1] -> weights [1, 2 (capped from e)]
    batch.set("oldLogprobs", batch.tensorOf([[-1, -1], [0], [0, 0, 0], [0]]));
    return batch;
  }

  test("importance weights from the engine's log-probs, on by default", () => {
    using batch = withLogprobs();
    const metrics = correctRollout(batch, config());
    expect(host(batch.get("isWeights")).slice(0, 2)).toEqual([1, 2]);
    expect(batch.has("lossMask")).toBe(false);
    expect(metrics["rollout_corr/is_weight_max"]).toBe(2);
    expect(metrics["rollout_corr/is_clipped_fraction"]).toBeCloseTo(1 / 7, 6);
  });

  test("rejection writes the loss mask; off means no columns", () => {
    using batch = withLogprobs();
    correctRollout(batch, config({ algorithm: { rollout_correction: { rollout_is: null, rollout_is_threshold: 2, rollout_rs: "token", rollout_rs_threshold: 2, rollout_rs_threshold_lower: null } } as never }));
    expect(batch.has("isWeights")).toBe(false);
    expect(host(batch.get("lossMask")).slice(0, 3)).toEqual([1, 0, 0]);
    expect(batch.tokenCount()).toBe(6);
    using off = withLogprobs();
    expect(correctRollout(off, config({ algorithm: { rollout_correction: { rollout_is: null, rollout_is_threshold: 2, rollout_rs: null, rollout_rs_threshold: 2, rollout_rs_threshold_lower: null } } as never }))).toEqual({});
    expect(off.has("isWeights") || off.has("lossMask")).toBe(false);
  });

  test("rows without the engine's log-probs skip it and say so", () => {
    using batch = StepBatch.fromRows(rows(), "cpu");
    batch.set("oldLogprobs", batch.tensorOf([[0, 0], [0], [0, 0, 0], [0]]));
    expect(correctRollout(batch, config())).toEqual({ "rollout_corr/skipped_rows_without_logprobs": 4 });
    expect(batch.has("isWeights")).toBe(false);
  });
});

describe("KL in the reward", () => {
  test("rewards are the scores minus β·KL(old ‖ ref), and the scores stay as they were", () => {
    using batch = StepBatch.fromRows(rows(), "cpu");
    batch.set("oldLogprobs", batch.tensorOf([[-1, -1], [-1], [-1, -1, -1], [-1]]));
    batch.set("refLogprobs", batch.tensorOf([[-1.5, -1], [-1], [-1, -1, -1], [-1]]));
    const kl = createKlController({ type: "fixed", kl_coef: 0.1 });
    rewardsWithKl(batch, config({ algorithm: { use_kl_in_reward: true } as never }), kl);
    // row 0: scores [0, 1]; kl [0.5, 0] -> rewards [-0.05, 1]
    expect(host(batch.get("tokenRewards")).slice(0, 2).map((x) => Math.round(x * 1e6) / 1e6)).toEqual([-0.05, 1]);
    expect(batch.rowSums("tokenScores")).toEqual([1, 0, 1, 1]);
  });
});
