/**
 * The engine's KV cache: preallocated, slot-based.
 *
 * Per layer, keys and values live in one tensor (slots + 1, slotTokens, kvHeads, headDim).
 * A slot holds one sequence; a step writes each row's new keys/values at (slot, position)
 * with one index_copy_, then attends over the slot's prefix. The extra last slot is
 * scratch: padded positions of a batched prefill write there, so padding never touches a
 * real sequence.
 *
 * The (token, head, dim) layout makes the cache flat-addressable per token (writes are a
 * single index_copy_) while a (slot, :L) window is still a strided view SDPA reads without
 * a copy. When a step's rows occupy consecutive slots (the common case: the slot pool hands
 * out low slots first) attention reads the cache in place; otherwise the rows are gathered.
 *
 * Grouped-query attention without repeating K/V: the query heads that share a KV head are
 * folded into the query-length axis, (B, kvHeads, groups * T, headDim), so SDPA attends
 * each KV head once for all of its query heads.
 */
import * as torch from "../torch/index.ts";
import { F, type Tensor } from "../torch/index.ts";
import { DTYPE_SIZE } from "../torch/index.ts";
import { VagenError } from "../core/errors.ts";
import { rotated, type AttentionBackend, type AttentionInput } from "../models/attention.ts";
import type { ModelSpec } from "../models/family.ts";

export interface KvCachePlan {
  slots: number;
  slotTokens: number;
  bytes: number;
}

export interface KvCacheSizing {
  /** Tokens one sequence may hold (prompt + generated). */
  maxSeqLen: number;
  /** Bytes the cache may use. */
  memoryBytes: number;
  /** Upper bound on slots regardless of memory. */
  maxSlots?: number;
}

/** Bytes of K and V for one token across all layers. */
export function kvBytesPerToken(spec: ModelSpec): number {
  return spec.numLayers * 2 * spec.numKvHeads * spec.headDim * DTYPE_SIZE[spec.dtype];
}

/** How many slots of `maxSeqLen` tokens fit the budget (one scratch slot is added on top). */
export function planKvCache(spec: ModelSpec, sizing: KvCacheSizing): KvCachePlan {
  const slotTokens = Math.min(sizing.maxSeqLen, spec.maxPositions);
  const perSlot = kvBytesPerToken(spec) * slotTokens;
  let slots = Math.floor(sizing.memoryBytes / perSlot) - 1;
  if (sizing.maxSlots !== undefined) slots = Math.min(slots, sizing.maxSlots);
  if (slots < 1) {
    throw new VagenError(
      `the KV cache budget of ${(sizing.memoryBytes / 2 ** 20).toFixed(1)} MiB holds no ${slotTokens}-token sequence ` +
        `(${(perSlot / 2 ** 20).toFixed(1)} MiB each, plus one scratch slot)`,
      "raise the engine's memory budget or lower its max sequence length",
    );
  }
  return { slots, slotTokens, bytes: perSlot * (slots + 1) };
}

/** What one forward step runs: per row, its slot and which positions are new. */
export interface StepLayout {
  slots: readonly number[];
  /** Cached positions before this step (where row b's new tokens start). */
  starts: readonly number[];
  /** Real (unpadded) new tokens of each row; the step's T is their maximum. */
  lengths: readonly number[];
}

/** Attention windows are rounded up to this many positions, so shapes repeat across steps. */
export const WINDOW_QUANTUM = 64;

export class SlotKvCache {
  private readonly keys: Tensor[] = [];
  private readonly values: Tensor[] = [];
  /** The same storage viewed as ((slots + 1) * slotTokens, kvHeads, headDim) for writes. */
  private readonly flatKeys: Tensor[] = [];
  private readonly flatValues: Tensor[] = [];
  readonly scratchSlot: number;

  constructor(
    readonly spec: ModelSpec,
    readonly slots: number,
    readonly slotTokens: number,
    /** Use libtorch's math attention instead of the fused kernels (a fallback where those fail). */
    readonly mathAttention = false,
  ) {
    this.scratchSlot = slots;
    const shape = [slots + 1, slotTokens, spec.numKvHeads, spec.headDim];
    const flat = [(slots + 1) * slotTokens, spec.numKvHeads, spec.headDim];
    for (let l = 0; l < spec.numLayers; l++) {
      const k = torch.keep(torch.zeros(shape, { dtype: spec.dtype, device: spec.device }));
      const v = torch.keep(torch.zeros(shape, { dtype: spec.dtype, device: spec.device }));
      this.keys.push(k);
      this.values.push(v);
      this.flatKeys.push(torch.keep(k.view(flat)));
      this.flatValues.push(torch.keep(v.view(flat)));
    }
  }

  get bytes(): number {
    return kvBytesPerToken(this.spec) * this.slotTokens * (this.slots + 1);
  }

  /**
   * Attention for one step laid out on the host. Create it inside the step's tidy
   * scope: its index tensors are freed with the step.
   */
  step(layout: StepLayout): AttentionBackend {
    return new StepAttention(this, this.addressing(layout));
  }

  /** Attention over addressing built elsewhere (e.g. static tensors of a CUDA graph). */
  attention(addressing: StepAddressing): AttentionBackend {
    return new StepAttention(this, addressing);
  }

  /** Windows a step may use: multiples of WINDOW_QUANTUM, capped at the slot size. */
  windowFor(end: number): number {
    return Math.min(this.slotTokens, Math.ceil(end / WINDOW_QUANTUM) * WINDOW_QUANTUM);
  }

  private addressing(layout: StepLayout): StepAddressing {
    const { spec, slotTokens, scratchSlot } = this;
    const device = spec.device;
    const B = layout.slots.length;
    const T = Math.max(...layout.lengths);
    const write = new Float64Array(B * T);
    let end = 0;
    for (let b = 0; b < B; b++) {
      const start = layout.starts[b]!;
      const len = layout.lengths[b]!;
      if (start + len > slotTokens) throw new Error(`row ${b} writes past its KV slot (${start + len} > ${slotTokens})`);
      end = Math.max(end, start + len);
      for (let t = 0; t < T; t++) {
        write[b * T + t] = t < len ? layout.slots[b]! * slotTokens + start + t : scratchSlot * slotTokens + (t % slotTokens);
      }
    }
    const window = this.windowFor(end);
    const consecutive = layout.slots.every((slot, b) => slot === layout.slots[0]! + b);
    const rows = consecutive ? { first: layout.slots[0]! } : { index: torch.tensor(Float64Array.from(layout.slots), [B], { dtype: "i64", device }) };
    let mask: Tensor | undefined;
    if (T === 1 || layout.starts.some((x) => x > 0)) {
      // Query t of row b sits at position starts[b] + t and sees keys 0..starts[b] + t.
      const qpos = new Float64Array(B * T);
      for (let b = 0; b < B; b++) for (let t = 0; t < T; t++) qpos[b * T + t] = layout.starts[b]! + t;
      mask = causalWindowMask(torch.tensor(qpos, [B, 1, T, 1], { dtype: "i64", device }), window);
    }
    return { B, T, window, writeIndex: torch.tensor(write, [B * T], { dtype: "i64", device }), rows, mask };
  }

  /** @internal used by StepAttention */
  layer(l: number): { keys: Tensor; values: Tensor; flatKeys: Tensor; flatValues: Tensor } {
    return { keys: this.keys[l]!, values: this.values[l]!, flatKeys: this.flatKeys[l]!, flatValues: this.flatValues[l]! };
  }

  dispose(): void {
    for (const t of [...this.flatKeys, ...this.flatValues, ...this.keys, ...this.values]) t.dispose();
    this.keys.length = this.values.length = this.flatKeys.length = this.flatValues.length = 0;
  }
}

/**
 * Where one step's keys and values go and what each query may see:
 *   writeIndex  (B * T,) flat cache row of every new (row, position); padding goes to scratch
 *   rows        the rows' slots: consecutive from `first` (read in place) or gathered by `index`
 *   mask        (B, 1, T, window) bool from causalWindowMask, or undefined for a fresh
 *               prefill (every row starts at 0: plain causal attention over the new keys)
 */
export interface StepAddressing {
  B: number;
  T: number;
  window: number;
  writeIndex: Tensor;
  rows: { first: number } | { index: Tensor };
  mask: Tensor | undefined;
}

/** (B, 1, T, window): key j is visible to a query at position qpos when j <= qpos. qpos: (B, 1, T, 1) int64. */
export function causalWindowMask(qpos: Tensor, window: number): Tensor {
  const keys = torch.arange(window, undefined, 1, { dtype: "i64", device: qpos.device }).view(1, 1, 1, window);
  return keys.le(qpos);
}

class StepAttention implements AttentionBackend {
  private readonly groups: number;
  /** The mask with each KV head's query group folded into the query axis, additive. */
  private readonly foldedMask: Tensor | undefined;

  constructor(
    private readonly cache: SlotKvCache,
    private readonly at: StepAddressing,
  ) {
    const { spec } = cache;
    this.groups = spec.numHeads / spec.numKvHeads;
    const { B, T, window, mask } = at;
    // Decode (T = 1) broadcasts the (B, 1, 1, window) mask over the group axis as is.
    const folded = mask && T > 1 && this.groups > 1 ? mask.expand(B, this.groups, T, window).reshape(B, 1, this.groups * T, window) : mask;
    // Additive (0 / -inf) in the compute dtype, made once per step: given a boolean mask,
    // SDPA would convert it again in every layer.
    this.foldedMask = folded && torch.zeros(folded.shape, { dtype: spec.dtype, device: spec.device }).maskedFill(folded.logicalNot(), -Infinity);
  }

  attend(layer: number, input: AttentionInput): Tensor {
    const { B, T } = this.at;
    const groups = this.groups;
    const { numKvHeads: H, headDim: D, numHeads } = this.cache.spec;
    const c = this.cache.layer(layer);
    const decodeKernel = T === 1 && !this.cache.mathAttention;
    if (decodeKernel) {
      // Decode: one kernel rotates q and k, writes the new key/value and attends over the
      // slot (CUDA); undefined where it does not apply.
      const [q, k, v] = [input.q.transpose(1, 2), input.k.transpose(1, 2), input.v.transpose(1, 2)];
      const rotary = { cos: input.cos, sin: input.sin };
      const out = F.slotDecodeAttention(q, k, v, c.flatKeys, c.flatValues, this.at.writeIndex, this.cache.slotTokens, this.at.window, D ** -0.5, rotary);
      if (out) return out;
    }
    const { q, k, v } = rotated(input);
    if (decodeKernel) {
      // The same kernel without its rotation, for layouts only that variant covers.
      const out = F.slotDecodeAttention(q, k, v, c.flatKeys, c.flatValues, this.at.writeIndex, this.cache.slotTokens, this.at.window, D ** -0.5);
      if (out) return out;
    }
    c.flatKeys.indexCopy_(0, this.at.writeIndex, k.permute(0, 2, 1, 3).reshape(B * T, H, D));
    c.flatValues.indexCopy_(0, this.at.writeIndex, v.permute(0, 2, 1, 3).reshape(B * T, H, D));
    if (this.foldedMask === undefined) {
      // A fresh prefill attends only over its own keys: causal, and fused kernels apply.
      return F.scaledDotProductAttention(q, k, v, { isCausal: true, enableGqa: groups > 1, forceMath: this.cache.mathAttention });
    }
    const keys = this.window_(c.keys);
    const values = this.window_(c.values);
    const qg = q.reshape(B, H, groups * T, D);
    const out = F.scaledDotProductAttention(qg, keys, values, { attnMask: this.foldedMask, forceMath: this.cache.mathAttention });
    return out.reshape(B, numHeads, T, D);
  }

  /** (B, kvHeads, window, headDim) view (or gather) of the rows' slots. */
  private window_(store: Tensor): Tensor {
    const prefix = store.narrow(1, 0, this.at.window);
    const rows = "first" in this.at.rows ? prefix.narrow(0, this.at.rows.first, this.at.B) : prefix.indexSelect(0, this.at.rows.index);
    return rows.transpose(1, 2);
  }
}
