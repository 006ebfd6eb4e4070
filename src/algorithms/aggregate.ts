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

/**
 * What a loss is divided by, counted over the whole mini-batch before it is split into
 * micro-batches (verl's global batch info). A micro-batch's aggregated loss is then its
 * share of the mini-batch's loss, and the micro-batch losses sum to the mini-batch's:
 * the gradient does not depend on how the mini-batch was split.
 */
export interface LossNormalizer {
  /** Masked tokens of the mini-batch (`token-mean`). */
  tokens: number;
  /** Rows of the mini-batch with at least one masked token (the `seq-mean-*` modes). */
  rows: number;
  /** `seq-mean-token-sum-norm`'s constant per row (Dr. GRPO's maximum response length). */
  tokenSumNorm: number;
}

/**
 * The normalizer of one whole batch: its masked tokens, its rows with a masked token,
 * and (default) its width T as the token-sum constant.
 *   mask: [B, T] 0/1
 */
export function lossNormalizer(mask: Tensor, tokenSumNorm?: number): LossNormalizer {
  const [, width] = rowsAndTokens(mask, "lossNormalizer mask");
  return torch.tidy(() => {
    const perRow = maskBool(mask).to({ dtype: "f64" }).sum(-1);
    return { tokens: perRow.sum().item(), rows: perRow.gt(0).to({ dtype: "f64" }).sum().item(), tokenSumNorm: tokenSumNorm ?? width };
  });
}

/**
 * Aggregates a per-token loss into a scalar, as verl's agg_loss with its global batch info:
 *   lossMat: [B, T] per-token losses
 *   mask:    [B, T] 0/1, which tokens count
 * returns a 0-d tensor of lossMat's dtype. With N = normalizer (default: this batch's own,
 * lossNormalizer(mask)):
 *
 * - `token-mean`: Σ loss·mask / N.tokens; every token of the mini-batch weighs the same.
 * - `seq-mean-token-sum`: Σ_b (Σ_t loss·mask) / N.rows; each row sums its tokens.
 * - `seq-mean-token-mean`: Σ_b (Σ_t loss·mask / n_b) / N.rows; each row averages its tokens.
 * - `seq-mean-token-sum-norm`: Σ_b Σ_t loss·mask / (N.rows · N.tokenSumNorm), Dr. GRPO's
 *   1/(G·L_max): a constant normaliser that has no length bias. (verl divides the
 *   micro-batch's sum by L_max and scales it by its share of the mini-batch's rows: the same.)
 * Rows without a masked token add nothing; denominators are clamped to at least 1, so an
 * empty mask gives 0.
 */
export function aggregateLoss(lossMat: Tensor, mask: Tensor, mode: LossAggMode, normalizer?: LossNormalizer): Tensor {
  if (!isLossAggMode(mode)) throw new Error(`loss_agg_mode: expected one of ${LOSS_AGG_MODES.join(", ")}, got "${mode}"`);
  rowsAndTokens(lossMat, "aggregateLoss lossMat");
  expectSameShape({ lossMat, mask });
  const n = normalizer ?? lossNormalizer(mask);
  return torch.tidy(() => {
    if (mode === "token-mean") return maskedSum(lossMat, mask).div(Math.max(1, n.tokens));
    const rowSums = maskedSum(lossMat, mask, -1); // [B]
    const rows = Math.max(1, n.rows);
    if (mode === "seq-mean-token-sum") return rowSums.sum().div(rows);
    if (mode === "seq-mean-token-sum-norm") return rowSums.sum().div(rows * n.tokenSumNorm);
    const rowMeans = rowSums.div(maskCount(mask, lossMat, -1).clampMin(1));
    return rowMeans.sum().div(rows);
  });
}
