/**
 * The attention seam between a decoder and whoever owns the keys and values.
 *
 * A decoder layer projects q/k/v and hands them, still unrotated, to an
 * `AttentionBackend` together with the rotary tables; the backend rotates (or folds the
 * rotation into its kernel), stores k/v where it keeps them and attends. The decoder
 * never knows whether that is a plain causal pass over one batch (training, full
 * recompute: `causalAttention`) or the engine's slot KV cache.
 */
import * as torch from "../torch/index.ts";
import { F, dims2, dims4, type Tensor } from "../torch/index.ts";

/** One layer's attention inputs for T new positions of each of B rows. */
export interface AttentionInput {
  /** (B, T, heads, headDim), not yet rotated. */
  q: Tensor;
  /** (B, T, kvHeads, headDim), not yet rotated. */
  k: Tensor;
  /** (B, T, kvHeads, headDim). */
  v: Tensor;
  /** (B, T, headDim) rotary tables, rotate-half convention (x * cos + rotateHalf(x) * sin). */
  cos: Tensor;
  sin: Tensor;
}

export interface AttentionBackend {
  /**
   * Attention of the new positions over each row's earlier keys (cached, or earlier in
   * this batch) and themselves, causally: (B, heads, T, headDim).
   */
  attend(layer: number, input: AttentionInput): Tensor;
}

/** q and k rotated, and q, k, v in the (B, heads, T, headDim) layout attention reads. */
export function rotated(input: AttentionInput): { q: Tensor; k: Tensor; v: Tensor } {
  const [q, k] = F.rotary(input.q, input.k, input.cos, input.sin);
  return { q: q.transpose(1, 2), k: k.transpose(1, 2), v: input.v.transpose(1, 2) };
}

export interface CausalAttentionOptions {
  /**
   * (B, T) with 1 for real tokens and 0 for padding (left or right). Omitted: every
   * position is real.
   */
  attentionMask?: Tensor;
  /** libtorch's math attention instead of its fused kernels. */
  forceMath?: boolean;
}

/**
 * Causal attention over the batch's own positions, without a cache: what a training
 * forward and a full recompute run. A query never attends to padding nor to the future.
 * The backend owns its mask tensor: dispose it (or `using`) after the forward.
 */
export function causalAttention(opts: CausalAttentionOptions = {}): AttentionBackend & Disposable {
  const mask = opts.attentionMask && torch.keep(torch.tidy(() => paddingMask(opts.attentionMask!)));
  return {
    attend(_layer, input) {
      const [, T, heads, headDim] = dims4(input.q, "attention q");
      const kvHeads = dims4(input.k, "attention k")[2];
      const { q, k, v } = rotated(input);
      return F.scaledDotProductAttention(q, k, v, {
        attnMask: mask,
        // Without a mask: causal over a fresh sequence (a single position sees itself).
        isCausal: !mask && T > 1,
        scale: headDim ** -0.5,
        enableGqa: kvHeads !== heads,
        forceMath: opts.forceMath,
      });
    },
    [Symbol.dispose]() {
      mask?.dispose();
    },
  };
}

/**
 * (B, 1, T, T) boolean mask from a (B, T) 0/1 attention mask: causal, minus padded keys.
 * A query at a padded slot would see no key at all (softmax over nothing is NaN, and NaN
 * leaks through 0 * NaN in later layers), so it attends to itself; its output is unused.
 */
export function paddingMask(attentionMask: Tensor): Tensor {
  const [B, T] = dims2(attentionMask, "attention mask");
  const device = attentionMask.device;
  const keys = torch.arange(0, T, 1, { dtype: "i64", device }).unsqueeze(0); // (1, T)
  const queries = torch.arange(0, T, 1, { dtype: "i64", device }).unsqueeze(1); // (T, 1)
  const valid = attentionMask.ne(0).reshape([B, 1, 1, T]);
  return keys.le(queries).unsqueeze(0).unsqueeze(0).logicalAnd(valid).logicalOr(keys.eq(queries));
}
