/**
 * The KV-cache seam between a decoder and whoever drives it (the simple generation loop
 * here, the engine's paged/batched caches later). A decoder layer hands its new keys and
 * values to `update` and attends over what comes back; it never knows how they are
 * stored. `pastLength` is read once per forward, before any layer updates.
 */
import * as torch from "../torch/index.ts";
import type { Tensor } from "../torch/index.ts";

export interface KVCache {
  /** Positions cached before the current forward (same for every row; rows are padded). */
  readonly pastLength: number;
  /**
   * Store layer `layer`'s keys/values for the new positions, (B, kvHeads, T, headDim),
   * and return all keys/values the layer attends over, (B, kvHeads, past + T, headDim).
   */
  update(layer: number, keys: Tensor, values: Tensor): [Tensor, Tensor];
  /** Free every cached tensor. */
  dispose(): void;
}

/**
 * The simplest cache: per layer, the concatenation of everything seen so far. Its tensors
 * are exempt from tidy scopes (they must outlive each step) and are freed by dispose().
 */
export class ConcatKVCache implements KVCache {
  private readonly keys: (Tensor | undefined)[];
  private readonly values: (Tensor | undefined)[];

  constructor(readonly numLayers: number) {
    this.keys = new Array(numLayers).fill(undefined);
    this.values = new Array(numLayers).fill(undefined);
  }

  get pastLength(): number {
    const k = this.keys[0];
    return k ? k.shape[2]! : 0;
  }

  update(layer: number, keys: Tensor, values: Tensor): [Tensor, Tensor] {
    const oldK = this.keys[layer];
    const oldV = this.values[layer];
    const k = torch.keep(oldK ? torch.cat([oldK, keys], 2) : keys);
    const v = torch.keep(oldV ? torch.cat([oldV, values], 2) : values);
    oldK?.dispose();
    oldV?.dispose();
    this.keys[layer] = k;
    this.values[layer] = v;
    return [k, v];
  }

  dispose(): void {
    for (let i = 0; i < this.numLayers; i++) {
      this.keys[i]?.dispose();
      this.values[i]?.dispose();
      this.keys[i] = undefined;
      this.values[i] = undefined;
    }
  }
}
