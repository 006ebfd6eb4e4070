/**
 * Hand-computed cases for KL estimators and controllers, token log-probs and entropy,
 * truncated importance sampling, and the reward-variance filters.
 */
import { describe, expect, test } from "bun:test";
import { torch, expectClose, values, noLeak } from "../torch/helpers.ts";
import { AdaptiveKlController, FixedKlController, applyKlPenalty, createKlController, klLoss, klPenalty } from "../../src/algorithms/kl.ts";
import { tokenLogProbs } from "../../src/algorithms/entropy.ts";
import { rolloutCorrection, type RolloutCorrectionOptions } from "../../src/algorithms/mismatch.ts";
import { rewardVarianceFilter, rewardVarianceTopPFilter, rowRewards } from "../../src/algorithms/filters.ts";
import { readMetrics } from "../../src/algorithms/metrics.ts";

const f64 = (data: number[][]) => torch.tensor(data, undefined, { dtype: "f64" });

describe("klPenalty", () => {
  // logπ = -1, logπ_ref = -2: ρ = 1
  const cases: [string, number][] = [
    ["kl", 1],
    ["k1", 1],
    ["abs", 1],
    ["mse", 0.5], // ½·1²
    ["k2", 0.5],
    ["low_var_kl", Math.exp(-1) + 1 - 1], // e^{ref−logπ} − (ref − logπ) − 1 = e^{-1} + 1 − 1
    ["k3", Math.exp(-1)],
  ];
  for (const [kind, expected] of cases) {
    test(kind, () => noLeak(() => expectClose(klPenalty(f64([[-1]]), f64([[-2]]), kind as never).item(), expected, 1e-12)));
  }

  test("low_var_kl is clamped to 10 as verl does", () =>
    noLeak(() => {
      // ref − logπ = −30 -> clamped to −20: e^{-20} + 20 − 1 ≈ 19 -> clamped to 10
      expect(klPenalty(f64([[0]]), f64([[-30]]), "low_var_kl").item()).toBe(10);
    }));

  test("verl's full KL is not offered", () => {
    expect(() => klPenalty(f64([[0]]), f64([[0]]), "full" as never)).toThrow(/kl_penalty: expected one of/);
  });

  test("klLoss: coefficient times aggregated KL", () =>
    noLeak(() => {
      // token-mean of [1, 3] (third masked) = 2; loss = 0.001·2
      const { loss, metrics } = klLoss(f64([[1, 3, 100]]), f64([[1, 1, 0]]), { coef: 0.001 });
      expectClose(loss.item(), 0.002, 1e-15);
      const m = readMetrics(metrics);
      expectClose([m["actor/kl_loss"]!, m["actor/kl_coef"]!], [2, 0.001], 1e-15);
    }));
});

describe("KL in the reward and its controllers", () => {
  test("applyKlPenalty subtracts β·kl on masked tokens", () =>
    noLeak(() => {
      // kl (k1) = old − ref = [0.5, 0, 0.5]; the third token is masked -> [0.5, 0, 0]
      // rewards = scores − 0.1·kl = [−0.05, 0, 1]; current KL = 0.5 / 2 masked tokens
      const r = applyKlPenalty(
        { tokenLevelScores: f64([[0, 0, 1]]), oldLogProb: f64([[-1, -1, -1]]), refLogProb: f64([[-1.5, -1, -1.5]]), responseMask: f64([[1, 1, 0]]) },
        { kind: "kl", beta: 0.1 },
      );
      expectClose(values(r.tokenLevelRewards), [-0.05, 0, 1], 1e-12);
      expectClose(r.currentKl, 0.25, 1e-12);
      expect(r.metrics).toEqual({ "actor/reward_kl_penalty": r.currentKl, "actor/reward_kl_penalty_coeff": 0.1 });
    }));

  test("adaptive controller", () => {
    const c = new AdaptiveKlController(0.1, 0.1, 10000);
    // kl 0.2 = 2× target: error clip(1, ±0.2) = 0.2; β·(1 + 0.2·100/10000) = 0.1·1.002
    c.update(0.2, 100);
    expectClose(c.value, 0.1002, 1e-15);
    // kl 0.05: error clip(−0.5) = −0.2; β·0.998
    c.update(0.05, 100);
    expectClose(c.value, 0.1002 * 0.998, 1e-15);
  });

  test("fixed controller and config validation", () => {
    const fixed = createKlController({ type: "fixed", kl_coef: 0.001 });
    expect(fixed).toBeInstanceOf(FixedKlController);
    fixed.update(5, 100);
    expect(fixed.value).toBe(0.001);
    expect(createKlController({ type: "adaptive" })).toBeInstanceOf(AdaptiveKlController);
    expect(() => createKlController({ type: "adaptive", horizon: 0 })).toThrow(/algorithm\.kl_ctrl\.horizon: expected a finite number > 0/);
    expect(() => createKlController({ type: "adaptive", target_kl: 0 })).toThrow(/algorithm\.kl_ctrl\.target_kl: expected a finite number > 0/);
    expect(() => createKlController({ kl_coeff: 1 })).toThrow(/algorithm\.kl_ctrl\.kl_coeff/);
  });
});

describe("tokenLogProbs", () => {
  test("uniform logits by hand", () =>
    noLeak(() => {
      // softmax([0, 0]) = [½, ½]: log-prob ln ½, entropy ln 2
      const r = tokenLogProbs(torch.zeros([1, 1, 2], { dtype: "f64" }), torch.tensor([[1]], undefined, { dtype: "i64" }));
      expectClose([r.logProbs.item(), r.entropy!.item()], [-Math.LN2, Math.LN2], 1e-12);
    }));

  test("chunked equals the direct log_softmax, values and gradients", () =>
    noLeak(() => {
      torch.manualSeed(3);
      const logits = torch.randn([2, 5, 7], { dtype: "f64" }).mul(2);
      const tokens = torch.randint(0, 7, [2, 5]);
      const weights = torch.randn([2, 5], { dtype: "f64" });
      const run = (chunk: number | "direct") => {
        const x = logits.detach().requiresGrad_(true);
        let logp: torch.Tensor, ent: torch.Tensor;
        if (chunk === "direct") {
          const all = x.logSoftmax(-1);
          logp = all.gather(2, tokens.unsqueeze(-1)).squeeze(-1);
          ent = all.exp().mul(all).sum(-1).neg();
        } else {
          const r = tokenLogProbs(x, tokens, { chunkTokens: chunk });
          logp = r.logProbs;
          ent = r.entropy!;
        }
        logp.mul(weights).sum().add(ent.mul(weights).sum().mul(0.5)).backward();
        return { logp: values(logp), ent: values(ent), grad: values(x.grad!) };
      };
      const direct = run("direct");
      for (const chunk of [1, 3, 10, 1024]) {
        const r = run(chunk);
        expectClose(r.logp, direct.logp, 1e-12);
        expectClose(r.ent, direct.ent, 1e-12);
        expectClose(r.grad, direct.grad, 1e-12);
      }
      // the entropy straight from the definition, without chunks
      expectClose(values(torch.tidy(() => { const logp = logits.logSoftmax(-1); return logp.exp().mul(logp).sum(-1).neg(); })), direct.ent, 1e-12);
    }));

  test("bf16 logits are computed in float32; temperature divides the logits", () =>
    noLeak(() => {
      const logits = torch.tensor([[[2, 0]]]).to({ dtype: "bf16" });
      const r = tokenLogProbs(logits, torch.tensor([[0]], undefined, { dtype: "i64" }), { temperature: 2, withEntropy: false });
      expect(r.logProbs.dtype).toBe("f32");
      expect(r.entropy).toBeUndefined();
      // logits / 2 = [1, 0]: log-prob of token 0 = 1 − ln(e + 1) ≈ −0.313262
      expectClose(r.logProbs.item(), 1 - Math.log(Math.E + 1), 1e-6);
    }));

  test("shape errors name the tensor", () => {
    expect(() => tokenLogProbs(torch.zeros([2, 3]), torch.zeros([2, 3], { dtype: "i64" }))).toThrow(/tokenLogProbs logits: expected \[rows, tokens, vocab\]/);
    expect(() => tokenLogProbs(torch.zeros([2, 3, 4]), torch.zeros([2, 4], { dtype: "i64" }))).toThrow(/tokenLogProbs tokens: expected shape \[2, 3\]/);
  });
});

describe("rolloutCorrection", () => {
  const tis: RolloutCorrectionOptions = { is: "token", isThreshold: 2, rs: null, rsThreshold: 2 };
  // r = old − rollout = [0, 1, −0.5, (masked)]; exp(r) = [1, e, 0.60653]
  const old = () => f64([[-1, -1, -1, -1]]);
  const rollout = () => f64([[-1, -2, -0.5, -9]]);
  const mask = () => f64([[1, 1, 1, 0]]);

  test("token weights truncated at the threshold, and the mismatch metrics by hand", () =>
    noLeak(() => {
      const { weights, lossMask, metrics } = rolloutCorrection(old(), rollout(), mask(), tis);
      // capped at 2 -> [1, 2, 0.60653, 0]
      expectClose(values(weights), [1, 2, Math.exp(-0.5), 0], 1e-12);
      expectClose(values(lossMask), [1, 1, 1, 0], 0);
      const m = readMetrics(metrics);
      expectClose(m["rollout_corr/logprob_abs_diff_mean"]!, 0.5, 1e-12); // (0 + 1 + 0.5) / 3
      expectClose(m["rollout_corr/logprob_abs_diff_max"]!, 1, 1e-12); // the masked 8 does not count
      expectClose(m["rollout_corr/mismatch_kl"]!, -1 / 6, 1e-12); // mean of rollout − old = (0 − 1 + 0.5) / 3
      // k3 = mean(e^r − r − 1) = (0 + (e − 2) + (e^{-0.5} − 0.5)) / 3
      expectClose(m["rollout_corr/mismatch_k3_kl"]!, (Math.E - 2 + Math.exp(-0.5) - 0.5) / 3, 1e-12);
      expectClose(m["rollout_corr/is_clipped_fraction"]!, 1 / 3, 1e-12);
      expectClose(m["rollout_corr/is_weight_max"]!, 2, 1e-12);
      expectClose(m["rollout_corr/is_weight_min"]!, Math.exp(-0.5), 1e-12);
      expectClose(m["rollout_corr/is_weight_mean"]!, (3 + Math.exp(-0.5)) / 3, 1e-12);
      expectClose(m["rollout_corr/rs_masked_fraction"]!, 0, 0);
    }));

  test("sequence weights: one weight per row, exp of the row's summed log-ratio", () =>
    noLeak(() => {
      // row 0: Σr = 0.5 -> e^0.5 = 1.6487 (under 2); row 1: Σr = 0.1 + 0.2 = 0.3 -> e^0.3
      const { weights } = rolloutCorrection(f64([[-1, -1, -1, -1], [0, 0, 0, 0]]), f64([[-1, -2, -0.5, -9], [-0.1, -0.2, 5, 5]]), f64([[1, 1, 1, 0], [1, 1, 0, 0]]), { ...tis, is: "sequence" });
      const h = Math.exp(0.5);
      const s = Math.exp(0.3);
      expectClose(values(weights), [h, h, h, 0, s, s, 0, 0], 1e-12);
    }));

  test("rejection masks tokens or rows outside [1/threshold, threshold]", () =>
    noLeak(() => {
      // token: e (> 2) leaves; 1 and e^{-0.5} (> 0.5) stay
      const token = rolloutCorrection(old(), rollout(), mask(), { is: null, isThreshold: 2, rs: "token", rsThreshold: 2 });
      expectClose(values(token.lossMask), [1, 0, 1, 0], 0);
      expectClose(values(token.weights), [1, 1, 1, 0], 0);
      expectClose(readMetrics(token.metrics)["rollout_corr/rs_masked_fraction"]!, 1 / 3, 1e-12);
      // sequence: Σr = 0.5 -> e^0.5 = 1.65 in [0.5, 2]: kept; with threshold 1.5 it leaves whole
      expectClose(values(rolloutCorrection(old(), rollout(), mask(), { is: null, isThreshold: 2, rs: "sequence", rsThreshold: 2 }).lossMask), [1, 1, 1, 0], 0);
      expectClose(values(rolloutCorrection(old(), rollout(), mask(), { is: null, isThreshold: 2, rs: "sequence", rsThreshold: 1.5 }).lossMask), [0, 0, 0, 0], 0);
      // geometric: mean r = 0.5 / 3 -> e^{1/6} = 1.18; a lower bound of 1.2 rejects the row
      expectClose(values(rolloutCorrection(old(), rollout(), mask(), { is: null, isThreshold: 2, rs: "geometric", rsThreshold: 2, rsThresholdLower: 1.2 }).lossMask), [0, 0, 0, 0], 0);
    }));

  test("agreeing policies give weights of exactly 1", () =>
    noLeak(() => {
      const { weights, metrics } = rolloutCorrection(f64([[-0.3, -2]]), f64([[-0.3, -2]]), f64([[1, 1]]), tis);
      expect(Array.from(values(weights))).toEqual([1, 1]);
      expect(readMetrics(metrics)["rollout_corr/is_clipped_fraction"]).toBe(0);
    }));

  test("weights are detached", () =>
    noLeak(() => {
      const lp = f64([[-1]]).requiresGrad_(true);
      expect(rolloutCorrection(lp, f64([[-1]]), f64([[1]]), tis).weights.requiresGrad).toBe(false);
    }));
});

describe("reward-variance filters", () => {
  // rewards [1, 0 | 1, 1 | 0, 2 | 5], groups a a b b c c d
  // population variances: a = 0.25, b = 0, c = 1, d = 0 (one sample)
  const input = { rewards: [1, 0, 1, 1, 0, 2, 5], groupIds: ["a", "a", "b", "b", "c", "c", "d"] };

  test("reward_variance keeps the top ⌈G·topk⌉ groups", () => {
    // ⌈4·0.5⌉ = 2 groups: c then a -> rows 0, 1, 4, 5
    const r = rewardVarianceFilter(input, { topk: 0.5 });
    expect(r.keepRows).toEqual([0, 1, 4, 5]);
    expect(r.lossScale).toBe(1);
    expect(r.metrics["filter/train/topk/mean_variance"]).toBe(0.625);
    expect(r.metrics["filter/train/original/mean_variance"]).toBe(0.3125);
    expect(r.metrics["filter/train/original/batch_size"]).toBe(7);
    // default topk 0.2: ⌈0.8⌉ = 1 group
    expect(rewardVarianceFilter(input).keepRows).toEqual([4, 5]);
  });

  test("reward_variance_top_p adds groups until the running sum reaches top_p·total", () => {
    // total 1.25, target 0.9·1.25 = 1.125: c (0 < 1.125, sum 1), a (1 < 1.125, sum 1.25), stop
    const r = rewardVarianceTopPFilter(input);
    expect(r.keepRows).toEqual([0, 1, 4, 5]);
    expectClose(r.lossScale, Math.sqrt(2 / 4), 1e-15);
    expect(r.metrics["filter/train/top_p/num_selected_groups"]).toBe(2);
    expect(r.metrics["filter/train/top_p/cumulative_variance_ratio"]).toBe(1);
    expect(r.metrics["filter/train/filtered/batch_size"]).toBe(4);
    // top_p 0.5: target 0.625, c alone reaches it
    const half = rewardVarianceTopPFilter(input, { topP: 0.5 });
    expect(half.keepRows).toEqual([4, 5]);
    expect(half.lossScale).toBe(0.5);
  });

  test("no variance anywhere keeps everything at scale 1", () => {
    const r = rewardVarianceTopPFilter({ rewards: [1, 1, 0], groupIds: [0, 0, 1] });
    expect(r).toEqual({ keepRows: [0, 1, 2], lossScale: 1, metrics: {} });
  });

  test("ddof 1 and row rewards from token scores", () =>
    noLeak(() => {
      // unbiased variance of a: (0.25 + 0.25) / 1 = 0.5
      expect(rewardVarianceFilter(input, { topk: 1, ddof: 1 }).metrics["filter/train/topk/max_variance"]).toBe(2);
      expect(Array.from(rowRewards(f64([[0, 0.5, 0.5], [1, 0, 0]])))).toEqual([1, 1]);
    }));

  test("mismatched lengths are refused", () => {
    expect(() => rewardVarianceFilter({ rewards: [1, 2], groupIds: ["a"] })).toThrow(/2 rewards but 1 group ids/);
  });
});
