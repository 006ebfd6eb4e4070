/**
 * Hand-computed cases for the loss side of src/algorithms: every expected number below
 * can be checked with a pencil (the arithmetic is in the comments), then the edge cases
 * (empty masks, all clipped, ratio 1) and gradients against finite differences.
 */
import { describe, expect, test } from "bun:test";
import { torch, expectClose, values, noLeak, finiteDifference, analyticGradient } from "../torch/helpers.ts";
import { aggregateLoss, lossNormalizer, maskedMean } from "../../src/algorithms/aggregate.ts";
import { gspoLoss, policyLoss, ppoClipLoss, turnPolicyLoss, type PolicyLossInputs } from "../../src/algorithms/policy-loss.ts";
import { valueLoss } from "../../src/algorithms/value-loss.ts";
import { readMetrics } from "../../src/algorithms/metrics.ts";

const f64 = (data: number[][]) => torch.tensor(data, undefined, { dtype: "f64" });
const ids = (data: number[][]) => torch.tensor(data, undefined, { dtype: "i64" });
const E = Math.E;

describe("aggregateLoss", () => {
  // loss [[1, 2, NaN, 0], [4, 5, 6, 0], [NaN, NaN, NaN, NaN]]; the NaNs sit at masked-out positions
  // mask [[1, 1, 0, 0], [1, 0, 0, 0], [0, 0, 0, 0]]: row sums 3 and 4, row counts 2 and 1, row 2 empty
  const loss = () => f64([[1, 2, NaN, 0], [4, 5, 6, 0], [NaN, NaN, NaN, NaN]]);
  const mask = () => f64([[1, 1, 0, 0], [1, 0, 0, 0], [0, 0, 0, 0]]);
  const cases: [string, number][] = [
    ["token-mean", 7 / 3], // (1 + 2 + 4) / 3 tokens
    ["seq-mean-token-sum", 3.5], // (3 + 4) / 2 rows with tokens
    ["seq-mean-token-mean", 2.75], // (3/2 + 4/1) / 2
    ["seq-mean-token-sum-norm", 7 / 8], // (3 + 4) / (2 rows · T = 4)
  ];
  for (const [mode, expected] of cases) {
    test(mode, () => noLeak(() => expectClose(aggregateLoss(loss(), mask(), mode as never).item(), expected, 1e-12)));
  }

  test("a mini-batch's normalizer: each part's loss is its share, and the parts sum to the whole", () =>
    noLeak(() => {
      // the batch above cut into row 0 and rows 1-2; the whole's counts: 3 tokens, 2 rows, T = 4
      const whole = { tokens: 3, rows: 2, tokenSumNorm: 4 };
      const top = (t: torch.Tensor) => t.narrow(0, 0, 1);
      const rest = (t: torch.Tensor) => t.narrow(0, 1, 2);
      for (const [mode, expected] of cases) {
        const sum = aggregateLoss(top(loss()), top(mask()), mode as never, whole).item() + aggregateLoss(rest(loss()), rest(mask()), mode as never, whole).item();
        expectClose(sum, expected, 1e-12);
      }
    }));

  test("lossNormalizer counts masked tokens and rows with a token", () =>
    noLeak(() => expect(lossNormalizer(mask())).toEqual({ tokens: 3, rows: 2, tokenSumNorm: 4 })));

  test("an empty mask aggregates to 0 in every mode, never NaN", () =>
    noLeak(() => {
      for (const [mode] of cases) expect(aggregateLoss(f64([[1, 2]]), f64([[0, 0]]), mode as never).item()).toBe(0);
    }));

  test("bool masks work like 0/1 masks", () =>
    noLeak(() => expectClose(maskedMean(f64([[1, 2, 3]]), torch.tensor([[true, false, true]])).item(), 2, 1e-12)));

  test("an unknown mode is refused by name", () => {
    expect(() => aggregateLoss(f64([[1]]), f64([[1]]), "seq-mean" as never)).toThrow(/loss_agg_mode: expected one of token-mean/);
  });
});

function inputs(logProb: number[][], oldLogProb: number[][], advantages: number[][], mask?: number[][], turnIds?: number[][]): PolicyLossInputs {
  return {
    logProb: f64(logProb),
    oldLogProb: f64(oldLogProb),
    advantages: f64(advantages),
    responseMask: f64(mask ?? logProb.map((r) => r.map(() => 1))),
    turnIds: turnIds ? ids(turnIds) : undefined,
  };
}

describe("ppoClipLoss (verl vanilla)", () => {
  test("ratio e with A = 1 is clipped to 1.2 everywhere", () =>
    noLeak(() => {
      // ratio = exp(1 - 0) = e; -A·ratio = -e, -A·clip(e, 0.8, 1.2) = -1.2; max = -1.2 per token
      const { loss, metrics } = ppoClipLoss(inputs([[1, 1, 1]], [[0, 0, 0]], [[1, 1, 1]]));
      expectClose(loss.item(), -1.2, 1e-12);
      const m = readMetrics(metrics);
      expect(m["actor/pg_clipfrac"]).toBe(1); // every token took the clipped branch
      expectClose(m["actor/ppo_kl"]!, -1, 1e-12); // mean of old - new = -1
      expect(m["actor/pg_clipfrac_lower"]).toBe(0);
      expectClose([m["actor/ratio_mean"]!, m["actor/ratio_max"]!, m["actor/ratio_min"]!], [E, E, E], 1e-12);
    }));

  test("ratio 1 gives -mean(A) and no clipping", () =>
    noLeak(() => {
      const { loss, metrics } = ppoClipLoss(inputs([[-0.5, -2]], [[-0.5, -2]], [[1, 3]]));
      expectClose(loss.item(), -2, 1e-12); // -(1 + 3) / 2
      const m = readMetrics(metrics);
      expect([m["actor/pg_clipfrac"], m["actor/ppo_kl"], m["actor/pg_clipfrac_lower"]]).toEqual([0, 0, 0]);
    }));

  test("dual clip bounds negative-advantage tokens at -A·clip_ratio_c", () =>
    noLeak(() => {
      // token 0: ratio e, A = -1: max(e, 1.2) = e < 3, kept
      // token 1: ratio e², A = -1: max(7.389, 1.2) = 7.389 > 3, dual clip -> 3
      const { loss, metrics } = ppoClipLoss(inputs([[1, 2]], [[0, 0]], [[-1, -1]]));
      expectClose(loss.item(), (E + 3) / 2, 1e-12);
      const m = readMetrics(metrics);
      expect(m["actor/pg_clipfrac"]).toBe(0); // the clipped branch (1.2) never exceeds the unclipped one
      expectClose(m["actor/pg_clipfrac_lower"]!, 0.5, 1e-12);
    }));

  test("separate low and high clip ratios", () =>
    noLeak(() => {
      // token 0: ratio 1.5, A = 1: max(-1.5, -1.28) = -1.28 (clip_ratio_high 0.28)
      // token 1: ratio 0.5, A = -1: max(0.5, 0.8) = 0.8 (clip_ratio_low 0.2)
      // token 2: ratio 1.1, A = 2: max(-2.2, -2.2) = -2.2, not counted as clipped
      const lp = [[Math.log(1.5), Math.log(0.5), Math.log(1.1)]];
      const { loss, metrics } = ppoClipLoss(inputs(lp, [[0, 0, 0]], [[1, -1, 2]]), { clipRatioLow: 0.2, clipRatioHigh: 0.28 });
      expectClose(loss.item(), (-1.28 + 0.8 - 2.2) / 3, 1e-12);
      expectClose(readMetrics(metrics)["actor/pg_clipfrac"]!, 2 / 3, 1e-12);
    }));

  test("rollout IS weights multiply each token's loss", () =>
    noLeak(() => {
      const x = inputs([[0, 0]], [[0, 0]], [[1, 1]]);
      // ratio 1: token losses -1, -1; weights 2, 0.5 -> (-2 - 0.5) / 2
      const { loss } = ppoClipLoss({ ...x, rolloutIsWeights: f64([[2, 0.5]]) });
      expectClose(loss.item(), -1.25, 1e-12);
    }));

  test("an empty mask gives loss 0 and zero metrics", () =>
    noLeak(() => {
      const { loss, metrics } = ppoClipLoss(inputs([[1, NaN]], [[0, 0]], [[1, 1]], [[0, 0]]));
      expect(loss.item()).toBe(0);
      for (const v of Object.values(readMetrics(metrics))) expect(v).toBe(0);
    }));

  test("clip_ratio_c <= 1 is refused", () => {
    expect(() => ppoClipLoss(inputs([[0]], [[0]], [[1]]), { clipRatioC: 1 })).toThrow(/clip_ratio_c: expected a number > 1/);
  });
});

describe("gspoLoss", () => {
  test("one geometric-mean ratio per row", () =>
    noLeak(() => {
      // log-ratios [ln 2, 0] -> mean ln2/2 -> s = √2 ≈ 1.41421 for both tokens
      // A = -1: max(√2, 1.2) = √2 per token; seq-mean-token-mean = √2
      const logProb = f64([[Math.log(2), 0]]).requiresGrad_(true);
      const { loss, metrics } = gspoLoss({ logProb, oldLogProb: f64([[0, 0]]), advantages: f64([[-1, -1]]), responseMask: f64([[1, 1]]) });
      expectClose(loss.item(), Math.SQRT2, 1e-12);
      loss.backward();
      // d/dlogπ_j of ½ Σ_j −A·w_j with ∇w_j = s: ½·1·√2 = 0.70711 each
      expectClose(values(logProb.grad!), [Math.SQRT1_2, Math.SQRT1_2], 1e-12);
      const m = readMetrics(metrics);
      expect(m["actor/pg_clipfrac"]).toBe(0);
      expect(m["actor/pg_clipfrac_lower"]).toBe(0);
      expectClose(m["actor/ratio_mean"]!, Math.SQRT2, 1e-12);
    }));

  test("a clipped row gets no gradient", () =>
    noLeak(() => {
      // s = √2 with A = +1: max(-√2, -1.2) = -1.2, the clipped constant
      const logProb = f64([[Math.log(2), 0]]).requiresGrad_(true);
      const { loss } = gspoLoss({ logProb, oldLogProb: f64([[0, 0]]), advantages: f64([[1, 1]]), responseMask: f64([[1, 1]]) });
      expectClose(loss.item(), -1.2, 1e-12);
      loss.backward();
      expect(values(logProb.grad!)).toEqual([0, 0]);
    }));
});

describe("turn_gspo / turn_ppo", () => {
  // one row, turns [0, 0, 1, -1], mask [1, 1, 1, 0]; log-ratios [ln 2, 0, ln 1.1, (masked)]
  // advantages [-1, -1, 1, 0]
  const x = () => inputs([[Math.log(2), 0, Math.log(1.1), 5]], [[0, 0, 0, 0]], [[-1, -1, 1, 0]], [[1, 1, 1, 0]], [[0, 0, 1, -1]]);

  test("turn_gspo clips each turn's geometric-mean ratio", () =>
    noLeak(() => {
      // turn 0: s = √2, A = -1: max(√2, 1.2) = √2 per token, token-mean over 2 -> √2
      // turn 1: s = 1.1, A = 1: max(-1.1, -1.1) = -1.1
      // row = √2 - 1.1 (turn-sum); one row -> loss = 0.31421
      const { loss, metrics } = turnPolicyLoss("turn_gspo", x());
      expectClose(loss.item(), Math.SQRT2 - 1.1, 1e-12);
      const m = readMetrics(metrics);
      expect(m["actor/turns_per_row"]).toBe(2);
      expectClose(m["actor/turn_len_mean"]!, 5 / 3, 1e-12); // token-weighted: (2 + 2 + 1) / 3
      expect(m["actor/pg_clipfrac"]).toBe(0);
      // log s per token [ln2/2, ln2/2, ln1.1]: mean m = (ln2 + ln1.1)/3, std = sqrt(mean of squared deviations)
      const ls = [Math.LN2 / 2, Math.LN2 / 2, Math.log(1.1)];
      const mean = (ls[0]! + ls[1]! + ls[2]!) / 3;
      expectClose(m["actor/turn_log_ratio_std"]!, Math.sqrt(ls.reduce((a, v) => a + (v - mean) ** 2, 0) / 3), 1e-12);
    }));

  test("turn_ppo clips each turn's full ratio and sums its tokens", () =>
    noLeak(() => {
      // turn 0: R = 2·1 = 2, A = -1: max(2, 1.2) = 2 per token, summed -> 4
      // turn 1: R = 1.1 -> -1.1; loss = 2.9
      const input = x();
      input.logProb.requiresGrad_(true);
      const { loss } = turnPolicyLoss("turn_ppo", input);
      expectClose(loss.item(), 2.9, 1e-12);
      loss.backward();
      // GSPO-token form: ∂/∂logπ_j = −A_j·R_t: [2, 2, -1.1, 0]
      expectClose(values(input.logProb.grad!), [2, 2, -1.1, 0], 1e-12);
    }));

  test("the normalizer's rows replace the local row count", () =>
    noLeak(() => expectClose(turnPolicyLoss("turn_gspo", x(), { normalizer: { tokens: 99, rows: 4, tokenSumNorm: 1 } }).loss.item(), (Math.SQRT2 - 1.1) / 4, 1e-12)));

  test("refuses to run without turn ids", () => {
    const { turnIds: _, ...rest } = x();
    expect(() => policyLoss("turn_gspo", rest)).toThrow(/turn_gspo: needs turnIds/);
  });

  test("one turn per row equals verl's gspo; one token per turn equals vanilla PPO", () =>
    noLeak(() => {
      torch.manualSeed(7);
      const B = 3, T = 5;
      const logProb = torch.randn([B, T], { dtype: "f64" }).mul(0.3);
      const oldLogProb = torch.randn([B, T], { dtype: "f64" }).mul(0.3);
      const advantages = torch.randn([B, T], { dtype: "f64" });
      const responseMask = f64([[1, 1, 1, 0, 0], [1, 1, 1, 1, 1], [0, 1, 1, 1, 0]]);
      const base = { logProb, oldLogProb, advantages, responseMask };
      const oneTurn = turnPolicyLoss("turn_gspo", { ...base, turnIds: torch.zeros([B, T], { dtype: "i64" }) }).loss.item();
      // gspo's seq-mean-token-mean with uniform row advantages is the same, but the
      // identity holds token by token, so random per-token advantages work too
      expectClose(oneTurn, gspoLoss(base).loss.item(), 1e-12);
      const perToken = torch.arange(0, T).unsqueeze(0).expand(B, T).contiguous();
      for (const mode of ["turn_gspo", "turn_ppo"] as const) {
        const turnLoss = turnPolicyLoss(mode, { ...base, turnIds: perToken }).loss.item();
        // a turn sum of single tokens averaged over rows = seq-mean-token-sum; no dual clip
        const vanilla = ppoClipLoss(base, { lossAggMode: "seq-mean-token-sum", clipRatioC: 1e12 }).loss.item();
        expectClose(turnLoss, vanilla, 1e-12);
      }
    }));
});

describe("valueLoss", () => {
  test("clipped value loss by hand", () =>
    noLeak(() => {
      // token 0: clip(1, 0 ± 0.5) = 0.5; (1 - 1.5)² = 0.25, (0.5 - 1.5)² = 1 -> 1 (clipped wins)
      // token 1: clip(2, 2 ± 0.5) = 2;   (2 - 1)² = 1 both -> 1
      // loss = 0.5 · mean(1, 1) = 0.5; token 2 is masked out
      const { loss, metrics } = valueLoss({ vpreds: f64([[1, 2, 9]]), values: f64([[0, 2, 0]]), returns: f64([[1.5, 1, 0]]), valueMask: f64([[1, 1, 0]]) });
      expectClose(loss.item(), 0.5, 1e-12);
      const m = readMetrics(metrics);
      expectClose([m["critic/vf_loss"]!, m["critic/vf_clipfrac"]!, m["critic/vpred_mean"]!], [0.5, 0.5, 1.5], 1e-12);
    }));

  test("anchor-only value mask and an empty mask", () =>
    noLeak(() => {
      // only token 1 counts: 0.5 · (3 - 1)² = 2 (vpreds == values, so no clipping)
      const v = { vpreds: f64([[5, 3]]), values: f64([[5, 3]]), returns: f64([[0, 1]]) };
      expectClose(valueLoss({ ...v, valueMask: f64([[0, 1]]) }).loss.item(), 2, 1e-12);
      expect(valueLoss({ ...v, valueMask: f64([[0, 0]]) }).loss.item()).toBe(0);
    }));
});

describe("gradients against finite differences (float64)", () => {
  torch.manualSeed(11);
  const B = 2, T = 4;
  const old = torch.keep(torch.randn([B, T], { dtype: "f64" }).mul(0.2));
  const start = torch.keep(old.add(torch.randn([B, T], { dtype: "f64" }).mul(0.15)));
  const mask = torch.keep(f64([[1, 1, 1, 0], [1, 1, 1, 1]]));
  // uniform advantages within a row / turn: there the GSPO-token gradient is the exact
  // gradient of the sequence-ratio objective, so finite differences apply
  const rowAdv = torch.keep(f64([[0.7, 0.7, 0.7, 0.7], [-1.3, -1.3, -1.3, -1.3]]));
  const tokenAdv = torch.keep(f64([[0.7, -0.4, 1.1, 0.2], [-1.3, 0.5, -0.9, 2.0]]));
  const turns = torch.keep(ids([[0, 0, 1, -1], [0, 0, 1, 1]]));
  const turnAdv = torch.keep(f64([[0.7, 0.7, -0.5, 0], [-1.3, -1.3, 0.9, 0.9]]));

  const cases: [string, (lp: torch.Tensor) => torch.Tensor][] = [
    ["vanilla token-mean", (lp) => ppoClipLoss({ logProb: lp, oldLogProb: old, advantages: tokenAdv, responseMask: mask }).loss],
    ["vanilla seq-mean-token-mean", (lp) => ppoClipLoss({ logProb: lp, oldLogProb: old, advantages: tokenAdv, responseMask: mask }, { lossAggMode: "seq-mean-token-mean" }).loss],
    ["gspo", (lp) => gspoLoss({ logProb: lp, oldLogProb: old, advantages: rowAdv, responseMask: mask }, { clipRatio: 0.5 }).loss],
    ["turn_gspo", (lp) => turnPolicyLoss("turn_gspo", { logProb: lp, oldLogProb: old, advantages: turnAdv, responseMask: mask, turnIds: turns }, { clipRatio: 0.5 }).loss],
  ];
  for (const [name, f] of cases) {
    test(name, () =>
      noLeak(() => {
        const analytic = analyticGradient(f, start);
        expect(analytic.some((g) => Math.abs(g) > 1e-3)).toBe(true); // the case is not all clipped
        expectClose(analytic, finiteDifference(f, start), 1e-7, 1e-6);
      }));
  }

  test("value loss", () =>
    noLeak(() => {
      const values_ = f64([[0.1, 0.5, -0.2, 0.3], [1.0, 0.0, 0.4, -0.6]]);
      const returns = f64([[0.4, 1.4, -0.1, 0.0], [0.2, 0.3, 0.4, -0.2]]);
      const vpreds = f64([[0.2, 0.75, -0.3, 0.1], [0.6, 0.1, 0.45, -0.5]]);
      const f = (v: torch.Tensor) => valueLoss({ vpreds: v, values: values_, returns, valueMask: mask }, { cliprangeValue: 0.2 }).loss;
      expectClose(analyticGradient(f, vpreds), finiteDifference(f, vpreds), 1e-7, 1e-6);
    }));
});
