/**
 * Attention confined to segments of rows: a vision tower's windows, images or frames,
 * [bounds[i], bounds[i+1]) of n patch rows, each attending within itself only.
 *
 * Segments of one length are a batch of segments, reshaped and attended at once. Segments
 * of several lengths (Qwen2.5-VL's windows when a side is not a multiple of the window:
 * 8 x 8, 8 x 4, 4 x 8 and 4 x 4 patches for a 12 x 12 image) are sorted into groups of one
 * length and each group is attended as a batch: one attention call per distinct length,
 * the rows put back in order after. A block-diagonal (n, n) mask does the same in one call
 * but grows with the square of the batch's patches: 300 images of 144 patches made a
 * 1.9e9-entry mask and an attention over all of it, every window block of every forward.
 * Small inputs keep that mask (one call instead of several, and the path the parity tests
 * measured against transformers).
 */
import * as torch from "../torch/index.ts";
import { F, type Tensor } from "../torch/index.ts";

/** Above this many rows segments of several lengths are attended by groups, not through an (n, n) mask. */
export const SEGMENT_MASK_MAX_ROWS = 4096;

/** How the n rows are attended: groups of equal-length segments, or one mask. */
export interface SegmentLayout {
  /** Groups of `count` segments of `length` rows, contiguous from `start` in the (permuted) row order. */
  groups: { start: number; count: number; length: number }[];
  /** Rows in group order (unset: already in it). */
  order?: Tensor;
  /** Where each original row sits in group order (the inverse of `order`). */
  inverse?: Tensor;
  /** (1, 1, n, n) block-diagonal boolean mask, when the rows are attended at once. */
  mask?: Tensor;
}

/**
 * The layout of the segments [bounds[i], bounds[i+1]) of n rows on `device`. `maskMaxRows`
 * (default SEGMENT_MASK_MAX_ROWS): the most rows for which mixed lengths use a mask; 0
 * always groups.
 */
export function segmentLayout(given: readonly number[], n: number, device: string, maskMaxRows = SEGMENT_MASK_MAX_ROWS): SegmentLayout {
  if (given.length < 2) return { groups: [{ start: 0, count: 1, length: n }] };
  if (given[0] !== 0 || given.at(-1) !== n || given.some((b, i) => i > 0 && b < given[i - 1]!)) {
    throw new Error(`segmentLayout: bounds ${JSON.stringify(given.slice(0, 8))}${given.length > 8 ? " ..." : ""} must rise from 0 to the ${n} rows`);
  }
  // Empty segments hold no rows: dropped, the others keep their bounds.
  const bounds = given.filter((b, i) => i === 0 || b > given[i - 1]!);
  const lengths = bounds.slice(1).map((b, i) => b - bounds[i]!);
  const first = lengths[0]!;
  if (lengths.every((l) => l === first)) return { groups: [{ start: 0, count: lengths.length, length: first }] };
  if (n <= maskMaxRows) return { groups: [], mask: blockDiagonalMask(bounds, n, device) };

  // Segments sorted by length, stably, so a group keeps its segments in their order.
  const bySize = lengths.map((length, segment) => ({ length, segment })).sort((a, b) => a.length - b.length || a.segment - b.segment);
  const order = new BigInt64Array(n);
  const groups: SegmentLayout["groups"] = [];
  let row = 0;
  for (const { length, segment } of bySize) {
    const last = groups.at(-1);
    if (last?.length === length) last.count += 1;
    else groups.push({ start: row, count: 1, length });
    for (let r = bounds[segment]!; r < bounds[segment + 1]!; r++) order[row++] = BigInt(r);
  }
  const inverse = new BigInt64Array(n);
  for (let i = 0; i < n; i++) inverse[Number(order[i]!)] = BigInt(i);
  return {
    groups,
    order: torch.tensor(order, [n], { dtype: "i64", device }),
    inverse: torch.tensor(inverse, [n], { dtype: "i64", device }),
  };
}

/**
 * Attention of q over k, v (each (n, heads, headDim), rows as `layout` was made for) within
 * each segment, not causal: (n, heads, headDim).
 */
export function segmentAttention(q: Tensor, k: Tensor, v: Tensor, layout: SegmentLayout, scale: number): Tensor {
  const [n, heads, headDim] = q.shape as [number, number, number];
  if (layout.mask !== undefined) {
    const whole = (t: Tensor) => t.transpose(0, 1).unsqueeze(0); // (1, heads, n, hd)
    const out = F.scaledDotProductAttention(whole(q), whole(k), whole(v), { attnMask: layout.mask, scale });
    return out.squeeze(0).transpose(0, 1);
  }
  const ordered = (t: Tensor) => (layout.order === undefined ? t : t.indexSelect(0, layout.order));
  const [qo, ko, vo] = [ordered(q), ordered(k), ordered(v)];
  const outs = layout.groups.map(({ start, count, length }) => {
    const batch = (t: Tensor) => t.narrow(0, start, count * length).reshape([count, length, heads, headDim]).transpose(1, 2); // (S, heads, L, hd)
    const out = F.scaledDotProductAttention(batch(qo), batch(ko), batch(vo), { scale });
    return out.transpose(1, 2).reshape([count * length, heads, headDim]);
  });
  const joined = outs.length === 1 ? outs[0]! : torch.cat(outs, 0);
  if (joined.shape[0] !== n) throw new Error(`segmentAttention: the layout covers ${joined.shape[0]} rows, the input has ${n}`);
  return layout.inverse === undefined ? joined : joined.indexSelect(0, layout.inverse);
}

/** Frees the layout's tensors. */
export function disposeSegmentLayout(layout: SegmentLayout): void {
  for (const t of [layout.order, layout.inverse, layout.mask]) t?.dispose();
}

/** (1, 1, n, n) boolean mask, true inside each [bounds[i], bounds[i+1]) segment. */
function blockDiagonalMask(bounds: readonly number[], n: number, device: string): Tensor {
  const segment = new Int32Array(n);
  for (let s = 0; s + 1 < bounds.length; s++) segment.fill(s, bounds[s]!, bounds[s + 1]!);
  const ids = torch.tensor(segment, [n], { dtype: "i32", device });
  return ids.unsqueeze(1).eq(ids.unsqueeze(0)).reshape([1, 1, n, n]);
}
