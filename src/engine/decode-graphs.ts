/**
 * CUDA-graph decode steps.
 *
 * An eager decode step launches a few dozen kernels per layer, each a separate FFI call
 * and libtorch dispatch: at small and medium batch sizes the GPU waits on the CPU. Here
 * a whole decode forward (embedding, every layer with its cache writes and attention,
 * the LM head) is captured once per (batch bucket, attention window) and replayed with a
 * single call. Inputs travel in one static int64 tensor, refreshed by one host-to-device
 * copy per step; the logits come out in a static tensor that sampling reads.
 *
 * Batches are padded up to the bucket: padding rows write into the cache's scratch slot
 * and their logits are ignored. Two variants per shape: when the rows sit in slots
 * 0..n-1 in order (sequences that started together, the usual rollout case) attention
 * reads the first `bucket` slots of the cache in place; otherwise the rows' windows are
 * gathered by slot index. Graphs are captured lazily, on first use of a shape, and
 * share one memory pool.
 */
import * as torch from "../torch/index.ts";
import type { Tensor } from "../torch/index.ts";
import type { FamilyDecoder } from "../models/family.ts";
import { causalWindowMask, type SlotKvCache } from "./kv-cache.ts";

/**
 * Token ids read on the device: row to[i] of a step takes source[from[i]], the token a
 * launched step sampled and the host has not read yet.
 */
export interface FedTokens {
  source: Tensor;
  from: number[];
  to: number[];
}

/** Writes fed tokens into `ids` (a step's (batch,) int64 token ids) on the device. */
export function feedTokens(ids: Tensor, fed: FedTokens): void {
  const k = fed.to.length;
  if (k === 0) return;
  torch.tidy(() => {
    if (fed.from.every((f, i) => f === i && fed.to[i] === i)) {
      // The usual steady state: the same rows, in the same order, as the step before.
      ids.narrow(0, 0, k).copy_(fed.source.narrow(0, 0, k));
      return;
    }
    const index = (xs: number[]) => torch.tensor(Float64Array.from(xs), [k], { dtype: "i64", device: ids.device });
    ids.indexCopy_(0, index(fed.to), fed.source.indexSelect(0, index(fed.from)));
  });
}

/** One row of a graphed decode step. */
export interface GraphRow {
  tokenId: number;
  /** Rotary position (the same on every axis for generated tokens). */
  position: number;
  slot: number;
  /** KV index the token is written at (= tokens already cached). */
  index: number;
}

interface Captured {
  graph: torch.cuda.CUDAGraph;
  /** (rows, batch) int64: token ids, positions per axis, write index, slot, query position. */
  inputs: Tensor;
  logits: Tensor;
}

export const DEFAULT_BATCH_BUCKETS = [1, 2, 4, 8, 16, 24, 32, 48, 64, 96, 128, 160, 192, 224, 256, 320, 384, 448, 512];
/** Smallest attention window a graph is captured for; windows double from here. */
const MIN_WINDOW = 256;

export class DecodeGraphs {
  private readonly graphs = new Map<string, Captured>();
  private pool: torch.cuda.CUDAGraph | undefined;
  private readonly buckets: number[];
  captures = 0;

  constructor(
    private readonly model: FamilyDecoder,
    private readonly cache: SlotKvCache,
    maxBatch: number,
    buckets: readonly number[] = DEFAULT_BATCH_BUCKETS,
  ) {
    this.buckets = buckets.filter((b) => b < maxBatch).concat([maxBatch]);
  }

  /** The bucket a batch of `n` rows runs in, or undefined when it is too large. */
  bucketFor(n: number): number | undefined {
    return this.buckets.find((b) => b >= n);
  }

  windowFor(end: number): number {
    let w = MIN_WINDOW;
    while (w < end) w *= 2;
    return Math.min(w, this.cache.slotTokens);
  }

  /**
   * Runs one decode step; returns (rows.length, vocab) logits, a view of the graph's
   * static output: read it before the next step. `fed` rows take their token from the
   * device (their `tokenId` is ignored).
   */
  run(rows: readonly GraphRow[], fed?: FedTokens): Tensor {
    const n = rows.length;
    const batch = this.bucketFor(n)!;
    const end = Math.max(...rows.map((r) => r.index + 1));
    const window = this.windowFor(end);
    const inPlace = rows.every((r, i) => r.slot === i);
    const g = this.get(batch, window, inPlace);
    const axes = this.model.spec.positionAxes;
    const { slotTokens, scratchSlot } = this.cache;
    const host = new Float64Array((axes + 4) * batch);
    for (let b = 0; b < batch; b++) {
      const r = rows[b];
      host[b] = r ? r.tokenId : 0;
      for (let a = 0; a < axes; a++) host[(1 + a) * batch + b] = r ? r.position : 0;
      host[(1 + axes) * batch + b] = r ? r.slot * slotTokens + r.index : scratchSlot * slotTokens + b;
      host[(2 + axes) * batch + b] = r ? r.slot : scratchSlot;
      host[(3 + axes) * batch + b] = r ? r.index : 0;
    }
    torch.tidy(() => {
      // From pinned memory without blocking: with overlapped steps the copy waits on the
      // device behind the step in flight, and the host goes on to queue this one.
      const staged = torch.tensor(host, [axes + 4, batch], { dtype: "i64" }).pinMemory();
      g.inputs.copy_(staged.to({ device: g.inputs.device, nonBlocking: true }));
    });
    if (fed) feedTokens(g.inputs.select(0, 0), fed);
    g.graph.replay();
    return g.logits.narrow(0, 0, n);
  }

  dispose(): void {
    for (const g of this.graphs.values()) {
      g.graph.dispose();
      g.inputs.dispose();
      g.logits.dispose();
    }
    this.graphs.clear();
    this.pool = undefined;
  }

  private get(batch: number, window: number, inPlace: boolean): Captured {
    const key = `${batch}x${window}${inPlace ? "" : "-gather"}`;
    const found = this.graphs.get(key);
    if (found) return found;
    const spec = this.model.spec;
    const axes = spec.positionAxes;
    const inputs = torch.keep(torch.zeros([axes + 4, batch], { dtype: "i64", device: spec.device }));
    // Until real rows arrive, every row points at the scratch slot.
    torch.tidy(() => {
      inputs.select(0, 1 + axes).copy_(torch.arange(batch, undefined, 1, { dtype: "i64", device: spec.device }).add(this.cache.scratchSlot * this.cache.slotTokens));
      inputs.select(0, 2 + axes).fill_(this.cache.scratchSlot);
    });
    const forward = () =>
      torch.tidy(() => {
        const ids = inputs.select(0, 0);
        const positions = inputs.narrow(0, 1, axes).view(axes, batch, 1);
        const attention = this.cache.attention({
          B: batch,
          T: 1,
          window,
          writeIndex: inputs.select(0, 1 + axes),
          rows: inPlace ? { first: 0 } : { index: inputs.select(0, 2 + axes) },
          mask: causalWindowMask(inputs.select(0, 3 + axes).view(batch, 1, 1, 1), window),
        });
        const embeds = this.model.embedTokens(ids).view(batch, 1, spec.hiddenSize);
        const hidden = this.model.forward(embeds, positions, attention);
        return this.model.logits(hidden.view(batch, spec.hiddenSize));
      });
    // Warm up outside the capture so lazy initialisation (kernels, workspaces) happens first.
    forward().dispose();
    torch.cuda.synchronize();
    const graph = new torch.cuda.CUDAGraph();
    const logits = graph.capture(() => torch.keep(forward()), { sharePoolWith: this.pool });
    this.pool ??= graph;
    this.captures++;
    const captured = { graph, inputs, logits };
    this.graphs.set(key, captured);
    return captured;
  }
}
