/**
 * Rollout/train mismatch correction: truncated importance sampling (TIS).
 *
 * The engine that sampled the rollout and the trainer that recomputes log-probs run
 * different kernels (and often precisions), so π_rollout and π_old differ slightly even
 * for the same weights. The policy gradient assumes samples from π_old; reweighting each
 * token by π_old / π_rollout corrects that, and capping the weight at C bounds the
 * variance a few disagreeing tokens could add:
 *   w = min(exp(oldLogProb − rolloutLogProb), C)      (detached; C default 2)
 * The policy losses multiply w into each token's loss (PolicyLossInputs.rolloutIsWeights).
 */
import * as torch from "../torch/index.ts";
import type { Tensor } from "../torch/index.ts";
import { expectSameShape, maskBool, maskedMean, maskedValues, rowsAndTokens } from "./aggregate.ts";
import type { LossMetrics } from "./metrics.ts";

export interface TruncatedIsResult {
  /** [B, T] capped weights, detached; 0 at unmasked positions. */
  weights: Tensor;
  /**
   * mismatch/logprob_abs_diff_{mean,max} (|old − rollout|), mismatch/mismatch_kl
   * (mean of rollout − old, a k1 estimate of KL(π_rollout ‖ π_old)), mismatch/mismatch_k3_kl
   * (mean of e^r − r − 1 with r = old − rollout), mismatch/tis_weight_{mean,max},
   * mismatch/tis_capped_fraction (share of tokens whose weight hit C). Masked means.
   */
  metrics: LossMetrics;
}

/**
 *   oldLogProb, rolloutLogProb, responseMask: [B, T]
 */
export function truncatedImportanceWeights(
  oldLogProb: Tensor,
  rolloutLogProb: Tensor,
  responseMask: Tensor,
  opts: { cap?: number } = {},
): TruncatedIsResult {
  rowsAndTokens(oldLogProb, "truncatedImportanceWeights oldLogProb");
  expectSameShape({ oldLogProb, rolloutLogProb, responseMask });
  const cap = opts.cap ?? 2;
  if (!(cap > 0)) throw new Error(`tis cap: expected a number > 0, got ${cap}`);
  return torch.noGrad(() =>
    torch.tidy(() => {
      const logRatio = oldLogProb.detach().sub(rolloutLogProb.detach()); // log π_old / π_rollout
      // clamped before exp only so that a wild token cannot overflow; any cap < e^20 is unaffected
      const ratio = logRatio.clampMax(20).exp();
      const weights = maskedValues(ratio.clampMax(cap), responseMask);
      const absDiff = logRatio.abs();
      const any = maskBool(responseMask).any();
      const k3 = logRatio.exp().sub(logRatio).sub(1);
      return {
        weights,
        metrics: {
          "mismatch/logprob_abs_diff_mean": maskedMean(absDiff, responseMask),
          "mismatch/logprob_abs_diff_max": torch.where(any, maskedValues(absDiff, responseMask).max(), 0),
          "mismatch/mismatch_kl": maskedMean(logRatio.neg(), responseMask),
          "mismatch/mismatch_k3_kl": maskedMean(k3, responseMask),
          "mismatch/tis_weight_mean": maskedMean(weights, responseMask),
          "mismatch/tis_weight_max": torch.where(any, weights.max(), 0),
          "mismatch/tis_capped_fraction": maskedMean(ratio.ge(cap).to({ dtype: weights.dtype }), responseMask),
        },
      };
    }),
  );
}
