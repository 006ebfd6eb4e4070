/**
 * Masked reductions and verl's loss aggregation modes (`agg_loss`).
 *
 * Every loss in src/algorithms produces a per-token loss matrix [B, T] and a 0/1 mask
 * [B, T] (bool, integer or float); aggregation turns the pair into one scalar. Masked-out
 * positions are replaced by 0 before summing (not multiplied by 0), so padding that holds
 * NaN or inf never leaks into a loss or its gradient.
 *
 * Denominators are counts clamped to at least 1: an empty mask gives 0 rather than
 * verl's 0 / 1e-8. For non-empty masks the two agree to about 1e-8 relative.
 */
import * as torch from "../torch/index.ts";
import type { Tensor } from "../torch/index.ts";

export const LOSS_AGG_MODES = ["token-mean", "seq-mean-token-sum", "seq-mean-token-mean", "seq-mean-token-sum-norm"] as const;
export type LossAggMode = (typeof LOSS_AGG_MODES)[number];

export function isLossAggMode(mode: string): mode is LossAggMode {
  return (LOSS_AGG_MODES as readonly string[]).includes(mode);
}

/** The [B, T] shape of a per-token tensor; throws naming the tensor when it is not 2-d. */
export function rowsAndTokens(t: Tensor, what: string): [rows: number, tokens: number] {
  const shape = t.shape;
  if (shape.length !== 2) throw new Error(`${what}: expected a [rows, tokens] tensor, got shape [${shape.join(", ")}]`);
  return [shape[0]!, shape[1]!];
}

/** Throws unless every tensor has the shape of the first one. */
export function expectSameShape(tensors: Record<string, Tensor | undefined>): void {
  const entries = Object.entries(tensors).filter((e): e is [string, Tensor] => e[1] !== undefined);
  const [firstName, first] = entries[0]!;
  const want = first.shape.join(", ");
  for (const [name, t] of entries.slice(1)) {
    if (t.shape.join(", ") !== want) {
      throw new Error(`${name}: expected shape [${want}] (the shape of ${firstName}), got [${t.shape.join(", ")}]`);
    }
  }
}

/** mask != 0, as a bool tensor. */
export function maskBool(mask: Tensor): Tensor {
  return mask.dtype === "bool" ? mask.alias() : mask.ne(0);
}

/** values where mask is set, 0 elsewhere (keeps values' dtype and gradient). */
export function maskedValues(values: Tensor, mask: Tensor): Tensor {
  return torch.tidy(() => torch.where(maskBool(mask), values, 0));
}

/** Sum of values over the masked positions, over `dim` (default: everything). */
export function maskedSum(values: Tensor, mask: Tensor, dim?: number): Tensor {
  return torch.tidy(() => maskedValues(values, mask).sum(dim));
}

/** Number of masked positions over `dim` (default: everything), in `like`'s dtype. */
export function maskCount(mask: Tensor, like: Tensor, dim?: number): Tensor {
  return torch.tidy(() => maskBool(mask).to({ dtype: like.dtype }).sum(dim));
}

/** Mean of values over the masked positions (0 when the mask is empty); a 0-d tensor. */
export function maskedMean(values: Tensor, mask: Tensor): Tensor {
  return torch.tidy(() => maskedSum(values, mask).div(maskCount(mask, values).clampMin(1)));
}

export interface AggregateOptions {
  /**
   * `seq-mean-token-sum-norm` divides the summed loss by this constant (Dr. GRPO's
   * "max tokens"); default: the row width T.
   */
  tokenSumNormalizer?: number;
}

/**
 * Aggregates a per-token loss into a scalar, as verl's agg_loss:
 *   lossMat: [B, T] per-token losses
 *   mask:    [B, T] 0/1, which tokens count
 * returns a 0-d tensor of lossMat's dtype.
 *
 * - `token-mean`: Σ loss·mask / Σ mask; every token weighs the same.
 * - `seq-mean-token-sum`: each row sums its tokens; rows are averaged.
 * - `seq-mean-token-mean`: each row averages its tokens; rows are averaged.
 * - `seq-mean-token-sum-norm`: Σ over all rows and tokens / T (or tokenSumNormalizer),
 *   a constant normaliser that avoids length bias.
 * The seq-mean modes average over the rows with at least one masked token, as recent
 * verl does, so fully masked padding rows do not dilute the mean.
 */
export function aggregateLoss(lossMat: Tensor, mask: Tensor, mode: LossAggMode, opts: AggregateOptions = {}): Tensor {
  if (!isLossAggMode(mode)) throw new Error(`loss_agg_mode: expected one of ${LOSS_AGG_MODES.join(", ")}, got "${mode}"`);
  const [, tokens] = rowsAndTokens(lossMat, "aggregateLoss lossMat");
  expectSameShape({ lossMat, mask });
  return torch.tidy(() => {
    if (mode === "token-mean") return maskedMean(lossMat, mask);
    const rowSums = maskedSum(lossMat, mask, -1); // [B]
    if (mode === "seq-mean-token-sum-norm") return rowSums.sum().div(opts.tokenSumNormalizer ?? tokens);
    const rowCounts = maskCount(mask, lossMat, -1); // [B]
    const rowLosses = mode === "seq-mean-token-sum" ? rowSums : rowSums.div(rowCounts.clampMin(1));
    const aliveRows = rowCounts.gt(0);
    return maskedMean(rowLosses, aliveRows);
  });
}
