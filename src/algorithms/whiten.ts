/**
 * Masked whitening as verl's `masked_whiten` (verl/utils/torch_functional.py), which every
 * GAE estimator applies to its advantages:
 *
 *   mean = sum(x * m) / (sum(m) + 1e-8)
 *   var  = sum((x - mean)^2 * m) / (sum(m) + 1e-8) * n / (n - 1)      (unbiased, n = sum(m))
 *   out  = (x - mean) / sqrt(var + 1e-8)
 *
 * over the whole batch (one mean and one variance). Positions where m = 0 are shifted and
 * scaled too, as verl does; callers multiply by the response mask when they want zeros.
 *
 * verl raises when fewer than two positions are selected. Here n = 0 returns x unchanged
 * and n = 1 returns x - mean (0 at the one position): a batch with one model token has
 * no spread to divide by, and a training step should not die on it.
 */
import type { Tensor } from "../torch/index.ts";

/**
 * Scalar masked mean with verl's 1e-8 in the denominator (not aggregate.ts's clamp to 1):
 * whitening matches verl's numbers to the last bit. mask is 0/1 in x's dtype.
 */
function verlMaskedMean(x: Tensor, mask: Tensor): Tensor {
  return x.mul(mask).sum().div(mask.sum().add(1e-8));
}

/** Scalar masked variance, unbiased (Bessel's correction) by default as verl. */
function maskedVar(x: Tensor, mask: Tensor, unbiased = true): Tensor {
  const centred = x.sub(verlMaskedMean(x, mask));
  const variance = verlMaskedMean(centred.square(), mask);
  if (!unbiased) return variance;
  const n = mask.sum().item();
  return variance.mul(n / (n - 1));
}

/** x: any shape; mask: same shape (0/1). Returns (x - mean) / sqrt(var + 1e-8). */
export function maskedWhiten(x: Tensor, mask: Tensor): Tensor {
  const m = mask.to(x.dtype);
  const n = m.sum().item();
  if (n === 0) return x.clone();
  const centred = x.sub(verlMaskedMean(x, m));
  if (n === 1) return centred;
  return centred.mul(maskedVar(x, m).add(1e-8).rsqrt());
}
