/**
 * The critic's clipped value loss (verl compute_value_loss):
 *   vClipped = clip(vpreds, values − c, values + c)        c = cliprange_value (0.5)
 *   ℓ        = max((vpreds − returns)², (vClipped − returns)²)
 *   loss     = 0.5 · aggregate(ℓ, valueMask)
 * The clip keeps one update from moving a value prediction further than c from the value
 * the advantages were computed with. `valueMask` comes from the estimator: in turn-level
 * (no-concat) training it marks only the anchor token of each turn.
 */
import * as torch from "../torch/index.ts";
import type { Tensor } from "../torch/index.ts";
import { aggregateLoss, expectSameShape, maskedMean, rowsAndTokens, type LossAggMode, type LossNormalizer } from "./aggregate.ts";
import type { LossMetrics } from "./metrics.ts";

export interface ValueLossInputs {
  /** [B, T] value predictions of the critic being trained (differentiable). */
  vpreds: Tensor;
  /** [B, T] values from before this update (the ones the advantages used). */
  values: Tensor;
  /** [B, T] return targets. */
  returns: Tensor;
  /** [B, T] 0/1: the positions the critic is trained on. */
  valueMask: Tensor;
}

export interface ValueLossOptions {
  /** c in clip(vpreds, values ± c); verl default 0.5. */
  cliprangeValue?: number;
  lossAggMode?: LossAggMode;
  /** The mini-batch's counts of valueMask (see aggregateLoss); default this batch's own. */
  normalizer?: LossNormalizer;
}

/** Returns the 0-d loss and critic/vf_loss, critic/vf_clipfrac, critic/vpred_mean. */
export function valueLoss(inputs: ValueLossInputs, opts: ValueLossOptions = {}): { loss: Tensor; metrics: LossMetrics } {
  const { vpreds, values, returns, valueMask } = inputs;
  rowsAndTokens(vpreds, "valueLoss vpreds");
  expectSameShape({ vpreds, values, returns, valueMask });
  const c = opts.cliprangeValue ?? 0.5;
  if (!(c >= 0)) throw new Error(`cliprange_value: expected a number >= 0, got ${c}`);
  return torch.tidy(() => {
    const vClipped = vpreds.clampTensor(values.sub(c), values.add(c));
    const unclippedError = vpreds.sub(returns).square();
    const clippedError = vClipped.sub(returns).square();
    const loss = aggregateLoss(unclippedError.maximum(clippedError), valueMask, opts.lossAggMode ?? "token-mean", opts.normalizer).mul(0.5);
    return {
      loss,
      metrics: torch.noGrad(() => ({
        "critic/vf_loss": loss.detach(),
        "critic/vf_clipfrac": maskedMean(clippedError.gt(unclippedError).to({ dtype: vpreds.dtype }), valueMask),
        "critic/vpred_mean": maskedMean(vpreds.detach(), valueMask),
      })),
    };
  });
}
