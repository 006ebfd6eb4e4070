/**
 * Bicubic resampling of 8-bit RGB images that reproduces Pillow's `Image.resize(...,
 * BICUBIC)` bit for bit (transformers' slow image processors resize through Pillow):
 * separable convolution, horizontal pass first, the cubic kernel with a = -0.5 widened
 * by the scale factor when shrinking (antialiasing), weights normalised per output pixel
 * and converted to 22-bit fixed point, results rounded and clipped to 0..255 after each
 * pass.
 */
import type { RGBImage } from "../../envs/_common/types.ts";

const PRECISION_BITS = 32 - 8 - 2;
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
}

function coefficients(inSize: number, outSize: number): Coefficients {
  const scale = inSize / outSize;
  const filterScale = Math.max(scale, 1);
  const support = BICUBIC_SUPPORT * filterScale;
  const kernelSize = Math.ceil(support) * 2 + 1;
  const start = new Int32Array(outSize);
  const count = new Int32Array(outSize);
  const weights = new Int32Array(outSize * kernelSize);
  const pre = new Float64Array(kernelSize);
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
      const fixed = w < 0 ? Math.trunc(-0.5 + w * (1 << PRECISION_BITS)) : Math.trunc(0.5 + w * (1 << PRECISION_BITS));
      weights[xx * kernelSize + x] = fixed;
    }
    start[xx] = xmin;
    count[xx] = xmax;
  }
  return { start, count, weights, kernelSize };
}

function clip8(acc: number): number {
  // acc fits in a double exactly; an arithmetic shift by PRECISION_BITS is a floor division.
  const v = Math.floor(acc / (1 << PRECISION_BITS));
  return v < 0 ? 0 : v > 255 ? 255 : v;
}

function resizeHorizontal(src: Uint8Array, width: number, height: number, outWidth: number): Uint8Array {
  const c = coefficients(width, outWidth);
  const out = new Uint8Array(outWidth * height * 3);
  const half = 1 << (PRECISION_BITS - 1);
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
      out[o] = clip8(r);
      out[o + 1] = clip8(g);
      out[o + 2] = clip8(b);
    }
  }
  return out;
}

function resizeVertical(src: Uint8Array, width: number, height: number, outHeight: number): Uint8Array {
  const c = coefficients(height, outHeight);
  const out = new Uint8Array(width * outHeight * 3);
  const half = 1 << (PRECISION_BITS - 1);
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
      out[o] = clip8(r);
      out[o + 1] = clip8(g);
      out[o + 2] = clip8(b);
    }
  }
  return out;
}

/** Resize to `width` x `height` with Pillow's bicubic filter; the same size returns a copy. */
export function resizeBicubic(image: RGBImage, width: number, height: number): RGBImage {
  let data = image.data;
  let w = image.width;
  if (width !== image.width) {
    data = resizeHorizontal(data, image.width, image.height, width);
    w = width;
  }
  if (height !== image.height) data = resizeVertical(data, w, image.height, height);
  return { width, height, data: data === image.data ? new Uint8Array(data) : data };
}
