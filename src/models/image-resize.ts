/**
 * Antialiased bicubic resampling of 8-bit RGB images, bit for bit like the two resizers
 * transformers uses:
 *
 * - "torch" (the default): torch's uint8 `interpolate(mode="bicubic", antialias=True)`
 *   on the CPU, which transformers 5's fast image processors call through torchvision;
 * - "pillow": Pillow's `Image.resize(..., BICUBIC)`, used by the slow processors.
 *
 * Both are the same separable convolution: horizontal pass first, the cubic kernel with
 * a = -0.5 widened by the scale factor when shrinking, weights normalised per output
 * pixel and converted to fixed point, results rounded and clipped to 0..255 after each
 * pass. They differ only in the fixed-point precision: Pillow always uses 22 bits; torch
 * stores weights as int16 and picks, per dimension, the most bits for which the largest
 * weight still fits.
 */
import type { RGBImage } from "../core/image.ts";
import { LruMap } from "../core/lru.ts";

export type ResizeFlavour = "torch" | "pillow";

const PILLOW_PRECISION_BITS = 32 - 8 - 2;
const BICUBIC_SUPPORT = 2;
const A = -0.5;

function bicubic(x: number): number {
  x = Math.abs(x);
  if (x < 1) return ((A + 2) * x - (A + 3)) * x * x + 1;
  if (x < 2) return (((x - 5) * x + 8) * x - 4) * A;
  return 0;
}

interface Coefficients {
  /** First input index read by each output pixel. */
  start: Int32Array;
  /** Number of input pixels read by each output pixel. */
  count: Int32Array;
  /** Fixed-point weights, `kernelSize` per output pixel. */
  weights: Int32Array;
  kernelSize: number;
  /** Fixed-point fraction bits of `weights`. */
  precision: number;
}

/** torch's rule: the most bits (< 22) for which round(2 * maxWeight * 2^bits) < 2^15. */
function int16Precision(maxWeight: number): number {
  let bits = 0;
  for (; bits < 22; bits++) {
    if (Math.trunc(0.5 + maxWeight * 2 ** (bits + 1)) >= 1 << 15) break;
  }
  return bits;
}

function toFixed(w: number, bits: number): number {
  const v = w * 2 ** bits;
  return Math.trunc(v < 0 ? v - 0.5 : v + 0.5);
}

/**
 * Coefficients by (in, out, flavour): a rollout resizes thousands of images of one size.
 * Bounded: sizes come from image sides, and a long-lived server sees many.
 */
const coefficientCache = new LruMap<string, Coefficients>(256);

function coefficients(inSize: number, outSize: number, flavour: ResizeFlavour): Coefficients {
  return coefficientCache.getOrMake(`${inSize}:${outSize}:${flavour}`, () => computeCoefficients(inSize, outSize, flavour));
}

function computeCoefficients(inSize: number, outSize: number, flavour: ResizeFlavour): Coefficients {
  const scale = inSize / outSize;
  const filterScale = Math.max(scale, 1);
  const support = BICUBIC_SUPPORT * filterScale;
  const kernelSize = Math.ceil(support) * 2 + 1;
  const start = new Int32Array(outSize);
  const count = new Int32Array(outSize);
  const weights = new Int32Array(outSize * kernelSize);
  const normalised = new Float64Array(outSize * kernelSize);
  const pre = new Float64Array(kernelSize);
  let maxWeight = 0;
  const invScale = 1 / filterScale;
  for (let xx = 0; xx < outSize; xx++) {
    const center = (xx + 0.5) * scale;
    // Pillow truncates toward zero here ((int) cast); center - support + 0.5 may be negative.
    let xmin = Math.trunc(center - support + 0.5);
    if (xmin < 0) xmin = 0;
    let xmax = Math.trunc(center + support + 0.5);
    if (xmax > inSize) xmax = inSize;
    xmax -= xmin;
    let sum = 0;
    for (let x = 0; x < xmax; x++) {
      const w = bicubic((x + xmin - center + 0.5) * invScale);
      pre[x] = w;
      sum += w;
    }
    for (let x = 0; x < xmax; x++) {
      const w = sum !== 0 ? pre[x]! / sum : pre[x]!;
      normalised[xx * kernelSize + x] = w;
      if (w > maxWeight) maxWeight = w;
    }
    start[xx] = xmin;
    count[xx] = xmax;
  }
  const precision = flavour === "pillow" ? PILLOW_PRECISION_BITS : int16Precision(maxWeight);
  for (let i = 0; i < weights.length; i++) weights[i] = toFixed(normalised[i]!, precision);
  return { start, count, weights, kernelSize, precision };
}

function clip8(acc: number, precision: number): number {
  // acc fits in a double exactly; an arithmetic shift by `precision` is a floor division.
  const v = Math.floor(acc / 2 ** precision);
  return v < 0 ? 0 : v > 255 ? 255 : v;
}

function resizeHorizontal(src: Uint8Array, width: number, height: number, outWidth: number, flavour: ResizeFlavour): Uint8Array {
  const c = coefficients(width, outWidth, flavour);
  const out = new Uint8Array(outWidth * height * 3);
  const half = 2 ** (c.precision - 1);
  for (let y = 0; y < height; y++) {
    const row = y * width * 3;
    for (let xx = 0; xx < outWidth; xx++) {
      const s = c.start[xx]!;
      const n = c.count[xx]!;
      const k = xx * c.kernelSize;
      let r = half, g = half, b = half;
      for (let x = 0; x < n; x++) {
        const w = c.weights[k + x]!;
        const p = row + (s + x) * 3;
        r += src[p]! * w;
        g += src[p + 1]! * w;
        b += src[p + 2]! * w;
      }
      const o = (y * outWidth + xx) * 3;
      out[o] = clip8(r, c.precision);
      out[o + 1] = clip8(g, c.precision);
      out[o + 2] = clip8(b, c.precision);
    }
  }
  return out;
}

function resizeVertical(src: Uint8Array, width: number, height: number, outHeight: number, flavour: ResizeFlavour): Uint8Array {
  const c = coefficients(height, outHeight, flavour);
  const out = new Uint8Array(width * outHeight * 3);
  const half = 2 ** (c.precision - 1);
  for (let yy = 0; yy < outHeight; yy++) {
    const s = c.start[yy]!;
    const n = c.count[yy]!;
    const k = yy * c.kernelSize;
    for (let x = 0; x < width; x++) {
      let r = half, g = half, b = half;
      for (let y = 0; y < n; y++) {
        const w = c.weights[k + y]!;
        const p = ((s + y) * width + x) * 3;
        r += src[p]! * w;
        g += src[p + 1]! * w;
        b += src[p + 2]! * w;
      }
      const o = (yy * width + x) * 3;
      out[o] = clip8(r, c.precision);
      out[o + 1] = clip8(g, c.precision);
      out[o + 2] = clip8(b, c.precision);
    }
  }
  return out;
}

/**
 * One axis of the resize as a dense (out, in) matrix of its fixed-point weights, with their
 * precision: output i is clip8(half + sum_j m[i, j] * in[j]). What a matrix product needs
 * to compute the same pass (device-patches.ts), exactly, in float64.
 */
export function resizeWeightMatrix(inSize: number, outSize: number, flavour: ResizeFlavour = "torch"): { matrix: Float64Array; precision: number } {
  const c = coefficients(inSize, outSize, flavour);
  const matrix = new Float64Array(outSize * inSize);
  for (let i = 0; i < outSize; i++) {
    for (let k = 0; k < c.count[i]!; k++) matrix[i * inSize + c.start[i]! + k] = c.weights[i * c.kernelSize + k]!;
  }
  return { matrix, precision: c.precision };
}

/** Resize to `width` x `height` with the antialiased bicubic filter; the same size returns a copy. */
export function resizeBicubic(image: RGBImage, width: number, height: number, flavour: ResizeFlavour = "torch"): RGBImage {
  let data = image.data;
  let w = image.width;
  if (width !== image.width) {
    data = resizeHorizontal(data, image.width, image.height, width, flavour);
    w = width;
  }
  if (height !== image.height) data = resizeVertical(data, w, image.height, height, flavour);
  return { width, height, data: data === image.data ? new Uint8Array(data) : data };
}
