/**
 * Rollout correction (verl's `rollout_correction`): importance weights and rejection for
 * the gap between the policy that sampled and the policy the trainer computes.
 *
 * The engine that sampled the rollout and the trainer that recomputes log-probs run
 * different kernels (and often precisions), so π_rollout and π_old differ slightly even
 * for the same weights. The policy gradient assumes samples from π_old; reweighting by
 * π_old / π_rollout corrects that, and truncating the weight at C bounds the variance a
 * few disagreeing tokens could add (truncated importance sampling). With r_j = logπ_old_j −
 * logπ_rollout_j on each masked token j of row b:
 *
 *   is: token      w_j = min(exp(r_j), C)
 *   is: sequence   w_j = min(exp(Σ_{j∈b} r_j), C)         one weight per row
 *   rs: token      token j leaves the loss when exp(r_j) ∉ [lower, upper]
 *   rs: sequence   row b leaves the loss when exp(Σ_b r_j) ∉ [lower, upper]
 *   rs: geometric  row b leaves the loss when exp(mean_b r_j) ∉ [lower, upper]
 *
 * The weights are detached; the policy losses multiply them into each token's loss
 * (PolicyLossInputs.rolloutIsWeights). Rejection returns a new loss mask, which the
 * trainer uses for the actor's loss and its normalizer. Everything runs without gradients.
 */
import * as torch from "../torch/index.ts";
import type { Tensor } from "../torch/index.ts";
import { expectSameShape, maskBool, maskCount, maskedMean, maskedValues, rowsAndTokens } from "./aggregate.ts";
import type { LossMetrics } from "./metrics.ts";

export const ROLLOUT_IS_LEVELS = ["token", "sequence"] as const;
export type RolloutIsLevel = (typeof ROLLOUT_IS_LEVELS)[number];
export const ROLLOUT_RS_LEVELS = ["token", "sequence", "geometric"] as const;
export type RolloutRsLevel = (typeof ROLLOUT_RS_LEVELS)[number];

export interface RolloutCorrectionOptions {
  /** Importance weights: per token, per row, or none (null). */
  is: RolloutIsLevel | null;
  /** C, the weights' upper bound (verl's rollout_is_threshold, default 2). */
  isThreshold: number;
  /** Rejection: per token, per row (sum or geometric mean of r), or none (null). */
  rs: RolloutRsLevel | null;
  /** Upper bound of the accepted ratio. */
  rsThreshold: number;
  /** Lower bound of the accepted ratio (default 1 / rsThreshold). */
  rsThresholdLower?: number;
}

export interface RolloutCorrection {
  /** [B, T] detached weights (1 without `is`); 0 at unmasked positions. */
  weights: Tensor;
  /** [B, T] the response mask with rejected tokens (or rows) set to 0; the input mask without `rs`. */
  lossMask: Tensor;
  /**
   * rollout_corr/logprob_abs_diff_{mean,max} (|old − rollout|), rollout_corr/mismatch_kl
   * (mean of rollout − old, a k1 estimate of KL(π_rollout ‖ π_old)), rollout_corr/mismatch_k3_kl,
   * rollout_corr/is_weight_{mean,max,min} and rollout_corr/is_clipped_fraction (share of
   * tokens whose weight hit C), rollout_corr/rs_masked_fraction (share of tokens rejected).
   * Masked means over the response mask.
   */
  metrics: LossMetrics;
}

/**
 *   oldLogProb, rolloutLogProb, responseMask: [B, T]
 */
export function rolloutCorrection(oldLogProb: Tensor, rolloutLogProb: Tensor, responseMask: Tensor, opts: RolloutCorrectionOptions): RolloutCorrection {
  rowsAndTokens(oldLogProb, "rolloutCorrection oldLogProb");
  expectSameShape({ oldLogProb, rolloutLogProb, responseMask });
  if (!(opts.isThreshold > 0)) throw new Error(`rollout_is_threshold: expected a number > 0, got ${opts.isThreshold}`);
  const upper = opts.rsThreshold;
  const lower = opts.rsThresholdLower ?? 1 / upper;
  if (opts.rs !== null && !(upper > 0 && lower >= 0 && lower <= upper)) {
    throw new Error(`rollout_rs_threshold: expected 0 <= lower (${lower}) <= upper (${upper}) and upper > 0`);
  }
  return torch.noGrad(() =>
    torch.tidy(() => {
      const mask = maskBool(responseMask);
      const dtype = oldLogProb.dtype === "f64" ? "f64" : "f32";
      const r = maskedValues(oldLogProb.detach().to({ dtype }).sub(rolloutLogProb.detach().to({ dtype })), mask); // log π_old / π_rollout, 0 off the mask
      const rowSum = r.sum(-1, true); // [B, 1]
      const rowMean = rowSum.div(maskCount(mask, r, -1).unsqueeze(-1).clampMin(1));
      // clamped before exp only so that a wild token cannot overflow; any threshold < e^20 is unaffected
      const tokenRatio = r.clampMax(20).exp();
      const broadcast = (rowValue: Tensor) => rowValue.clampMax(20).exp().expand(r.shape);

      const isRatio = opts.is === "sequence" ? broadcast(rowSum) : tokenRatio;
      const weights = opts.is === null ? maskedValues(torch.onesLike(r), mask) : maskedValues(isRatio.clampMax(opts.isThreshold), mask);
      let keep = mask;
      if (opts.rs !== null) {
        const rsRatio = opts.rs === "token" ? tokenRatio : broadcast(opts.rs === "sequence" ? rowSum : rowMean);
        keep = mask.logicalAnd(rsRatio.ge(lower)).logicalAnd(rsRatio.le(upper));
      }
      const lossMask = keep.to({ dtype: responseMask.dtype === "bool" ? "f32" : responseMask.dtype });
      const any = mask.any();
      const absDiff = r.abs();
      const k3 = r.exp().sub(r).sub(1);
      return {
        weights,
        lossMask,
        metrics: {
          "rollout_corr/logprob_abs_diff_mean": maskedMean(absDiff, mask),
          "rollout_corr/logprob_abs_diff_max": torch.where(any, absDiff.max(), 0),
          "rollout_corr/mismatch_kl": maskedMean(r.neg(), mask),
          "rollout_corr/mismatch_k3_kl": maskedMean(k3, mask),
          "rollout_corr/is_weight_mean": maskedMean(weights, mask),
          "rollout_corr/is_weight_max": torch.where(any, weights.max(), 0),
          "rollout_corr/is_weight_min": torch.where(any, torch.where(mask, weights, Infinity).min(), 0),
          "rollout_corr/is_clipped_fraction": opts.is === null ? torch.zeros([], { dtype, device: r.device }) : maskedMean(isRatio.gt(opts.isThreshold).to({ dtype }), mask),
          "rollout_corr/rs_masked_fraction": maskedMean(mask.logicalAnd(keep.logicalNot()).to({ dtype }), mask),
        },
      };
    }),
  );
}
