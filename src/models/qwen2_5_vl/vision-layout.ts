/**
 * Index bookkeeping of the Qwen2.5-VL vision tower, in plain arrays (all integer work, no
 * tensors): per-patch 2D rotary positions, the window permutation that groups patches
 * into window_size x window_size pixel windows (in units of merged 2x2 blocks), and the
 * attention segments (`cu_seqlens`) for window and full attention.
 *
 * Patches arrive in the image processor's order, where the 4 patches of a merged block
 * are adjacent, so every index here works on merged blocks of `mergeSize^2` patches.
 */
export interface VisionLayout {
  /** Per patch (processor order): [row, col] in patches, for the 2D rotary embedding. */
  rotaryPositions: Int32Array;
  /** Merged-block permutation: windowIndex[i] = original block placed at slot i. */
  windowIndex: Int32Array;
  /** Inverse permutation, to restore the processor order after the merger. */
  reverseIndex: Int32Array;
  /** Window-attention segment boundaries over the permuted patches (empty windows removed). */
  windowSeqlens: number[];
  /** Full-attention segment boundaries (one segment per image frame). */
  fullSeqlens: number[];
  /** Largest grid side, the size of the rotary frequency table. */
  maxGridSide: number;
}

export interface VisionGeometry {
  spatialMergeSize: number;
  windowSize: number;
  patchSize: number;
}

export function visionLayout(gridThw: readonly (readonly number[])[], geo: VisionGeometry): VisionLayout {
  const m = geo.spatialMergeSize;
  const unit = m * m;
  const windowBlocks = geo.windowSize / m / geo.patchSize;
  let totalPatches = 0;
  let maxGridSide = 0;
  for (const [t, h, w] of gridThw) {
    totalPatches += t! * h! * w!;
    maxGridSide = Math.max(maxGridSide, h!, w!);
  }
  const rotaryPositions = new Int32Array(totalPatches * 2);
  const windowIndex = new Int32Array(totalPatches / unit);
  const windowSeqlens = [0];
  const fullSeqlens = [0];
  let p = 0;
  let slot = 0;
  let blockBase = 0;
  for (const [t, h, w] of gridThw) {
    const bh = h! / m;
    const bw = w! / m;
    for (let f = 0; f < t!; f++) {
      for (let i = 0; i < bh; i++) {
        for (let j = 0; j < bw; j++) {
          for (let a = 0; a < m; a++) {
            for (let b = 0; b < m; b++) {
              rotaryPositions[p * 2] = i * m + a;
              rotaryPositions[p * 2 + 1] = j * m + b;
              p++;
            }
          }
        }
      }
      fullSeqlens.push(fullSeqlens[fullSeqlens.length - 1]! + h! * w!);
    }
    // Windows tile the merged grid from the top-left; the last row/column may be partial.
    const nWinH = Math.ceil(bh / windowBlocks);
    const nWinW = Math.ceil(bw / windowBlocks);
    for (let f = 0; f < t!; f++) {
      for (let wi = 0; wi < nWinH; wi++) {
        for (let wj = 0; wj < nWinW; wj++) {
          let count = 0;
          for (let i = wi * windowBlocks; i < Math.min((wi + 1) * windowBlocks, bh); i++) {
            for (let j = wj * windowBlocks; j < Math.min((wj + 1) * windowBlocks, bw); j++) {
              windowIndex[slot++] = blockBase + f * bh * bw + i * bw + j;
              count++;
            }
          }
          windowSeqlens.push(windowSeqlens[windowSeqlens.length - 1]! + count * unit);
        }
      }
    }
    blockBase += t! * bh * bw;
  }
  const reverseIndex = new Int32Array(windowIndex.length);
  windowIndex.forEach((orig, i) => (reverseIndex[orig] = i));
  return { rotaryPositions, windowIndex, reverseIndex, windowSeqlens, fullSeqlens, maxGridSide };
}
