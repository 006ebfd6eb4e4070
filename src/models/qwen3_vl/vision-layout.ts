/**
 * Index bookkeeping of the Qwen3-VL vision tower, in plain arrays (no tensors). Patches
 * arrive in the image processor's order, where the merge x merge patches of one merged
 * token are adjacent (block row, block column, row in block, column in block); per patch
 * it gives its (row, column) in the image's patch grid, for the 2D rotary embedding, and
 * the bilinear taps into the learned square position table, which transformers resamples
 * to each image's grid as F.interpolate(mode="bilinear", align_corners=True) would, in
 * float32.
 */
export interface VisionLayout {
  /** Per patch: [row, col] in patches. */
  rotaryPositions: Int32Array;
  /** Per patch: 4 rows of the position table ((h0, w0), (h0, w1), (h1, w0), (h1, w1)). */
  positionTaps: Int32Array;
  /** Per patch: the 4 taps' bilinear weights, float32 as transformers computes them. */
  positionWeights: Float32Array;
  /** Attention segment boundaries over the patches: one segment per image frame. */
  frameBounds: number[];
  /** Largest grid side, the size of the rotary frequency table. */
  maxGridSide: number;
}

export function visionLayout(gridThw: readonly (readonly number[])[], mergeSize: number, tableSide: number): VisionLayout {
  const m = mergeSize;
  const total = gridThw.reduce((n, g) => n + g[0]! * g[1]! * g[2]!, 0);
  const rotaryPositions = new Int32Array(total * 2);
  const positionTaps = new Int32Array(total * 4);
  const positionWeights = new Float32Array(total * 4);
  const frameBounds = [0];
  let maxGridSide = 0;
  let p = 0;
  for (const [t, h, w] of gridThw) {
    maxGridSide = Math.max(maxGridSide, h!, w!);
    const rowsTaps = Array.from({ length: h! }, (_, r) => axisTaps(r, h!, tableSide));
    const colsTaps = Array.from({ length: w! }, (_, c) => axisTaps(c, w!, tableSide));
    for (let f = 0; f < t!; f++) {
      for (let bh = 0; bh < h! / m; bh++) {
        for (let bw = 0; bw < w! / m; bw++) {
          for (let a = 0; a < m; a++) {
            for (let b = 0; b < m; b++) {
              const row = bh * m + a;
              const col = bw * m + b;
              rotaryPositions[p * 2] = row;
              rotaryPositions[p * 2 + 1] = col;
              const [rt, rw] = rowsTaps[row]!;
              const [ct, cw] = colsTaps[col]!;
              for (let i = 0; i < 2; i++) {
                for (let j = 0; j < 2; j++) {
                  positionTaps[p * 4 + i * 2 + j] = rt[i]! * tableSide + ct[j]!;
                  positionWeights[p * 4 + i * 2 + j] = Math.fround(rw[i]! * cw[j]!);
                }
              }
              p++;
            }
          }
        }
      }
      frameBounds.push(frameBounds[frameBounds.length - 1]! + h! * w!);
    }
  }
  return { rotaryPositions, positionTaps, positionWeights, frameBounds, maxGridSide };
}

/**
 * The two table rows (floor, floor + 1, clamped to the table) that target index `index`
 * of an axis of `size` reads with align_corners=True, and their weights, each step rounded
 * to float32 as transformers' vectorised version computes it.
 */
function axisTaps(index: number, size: number, side: number): [[number, number], [number, number]] {
  const src = Math.fround(Math.fround(index * (side - 1)) / Math.max(size - 1, 1));
  const floor = Math.floor(src);
  const frac = Math.fround(src - floor);
  const clamp = (i: number) => Math.min(Math.max(i, 0), side - 1);
  const weight = (offset: number) => Math.max(0, Math.fround(1 - Math.abs(Math.fround(frac - offset))));
  return [
    [clamp(floor), clamp(floor + 1)],
    [weight(0), weight(1)],
  ];
}
