/**
 * Index bookkeeping of the GLM-4V vision tower, in plain arrays (no tensors). Patches
 * arrive in the image processor's order, where the merge x merge patches of one merged
 * token are adjacent (block row, block column, row in block, column in block); per patch
 * it gives its (row, column) in the image's patch grid, for the 2D rotary embedding, and
 * the 16 bicubic taps into the learned square position table that transformers reads with
 * F.grid_sample(mode="bicubic", align_corners=False, padding_mode="border") at the patch
 * centre ((col + 0.5) / w, (row + 0.5) / h), each step rounded to float32 as it computes.
 */
export interface VisionLayout {
  /** Per patch: [row, col] in patches. */
  rotaryPositions: Int32Array;
  /** Per patch: 16 rows of the position table (4 table rows x 4 table columns, clamped to the border). */
  positionTaps: Int32Array;
  /** Per patch: the 16 taps' bicubic weights (row weight x column weight). */
  positionWeights: Float32Array;
  /** Attention segment boundaries over the patches: one segment per image frame. */
  frameBounds: number[];
  /** Largest grid side, the size of the rotary frequency table. */
  maxGridSide: number;
}

const TAPS = 16;

export function visionLayout(gridThw: readonly (readonly number[])[], mergeSize: number, tableSide: number): VisionLayout {
  const m = mergeSize;
  const total = gridThw.reduce((n, g) => n + g[0]! * g[1]! * g[2]!, 0);
  const rotaryPositions = new Int32Array(total * 2);
  const positionTaps = new Int32Array(total * TAPS);
  const positionWeights = new Float32Array(total * TAPS);
  const frameBounds = [0];
  let maxGridSide = 0;
  let p = 0;
  for (const [t, h, w] of gridThw) {
    maxGridSide = Math.max(maxGridSide, h!, w!);
    const rowTaps = Array.from({ length: h! }, (_, r) => bicubicTaps(r, h!, tableSide));
    const colTaps = Array.from({ length: w! }, (_, c) => bicubicTaps(c, w!, tableSide));
    for (let f = 0; f < t!; f++) {
      for (let bh = 0; bh < h! / m; bh++) {
        for (let bw = 0; bw < w! / m; bw++) {
          for (let a = 0; a < m; a++) {
            for (let b = 0; b < m; b++) {
              const row = bh * m + a;
              const col = bw * m + b;
              rotaryPositions[p * 2] = row;
              rotaryPositions[p * 2 + 1] = col;
              const rt = rowTaps[row]!;
              const ct = colTaps[col]!;
              for (let i = 0; i < 4; i++) {
                for (let j = 0; j < 4; j++) {
                  positionTaps[p * TAPS + i * 4 + j] = rt.index[i]! * tableSide + ct.index[j]!;
                  positionWeights[p * TAPS + i * 4 + j] = Math.fround(rt.weight[i]! * ct.weight[j]!);
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

/** A float32 operation, as torch runs it on float tensors. */
const f = Math.fround;

/**
 * The four table indices (clamped to [0, side - 1]: border padding) and cubic weights
 * (A = -0.75, ATen's get_cubic_upsample_coefficients) that grid_sample reads along one
 * axis for target index `index` of `size`: the normalised centre (index + 0.5) / size * 2 - 1,
 * unnormalised without align_corners to ((x + 1) * side - 1) / 2.
 */
function bicubicTaps(index: number, size: number, side: number): { index: number[]; weight: number[] } {
  const normalised = f(f(f(f(index + 0.5) / size) * 2) - 1);
  const source = f(f(f(f(normalised + 1) * side) - 1) / 2);
  const floor = Math.floor(source);
  const t = f(source - floor);
  const A = -0.75;
  // cubic_convolution1 for |x| <= 1, cubic_convolution2 for 1 < |x| < 2.
  const near = (x: number) => f(f(f(f(f(A + 2) * x) - (A + 3)) * x) * x + 1);
  const far = (x: number) => f(f(f(f(f(f(A * x) - 5 * A) * x) + 8 * A) * x) - 4 * A);
  const weight = [far(f(t + 1)), near(t), near(f(1 - t)), far(f(f(1 - t) + 1))];
  const clamp = (i: number) => Math.min(Math.max(i, 0), side - 1);
  return { index: [clamp(floor - 1), clamp(floor), clamp(floor + 1), clamp(floor + 2)], weight };
}
