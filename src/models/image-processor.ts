/**
 * The Qwen2-VL image processor (used unchanged by Qwen2.5-VL), matching transformers'
 * Qwen2VLImageProcessor: smart resize to multiples of patch_size * merge_size within
 * [min_pixels, max_pixels], antialiased bicubic resampling (bit for bit like
 * transformers 5, see image-resize.ts), rescale to [0,1], normalise with the CLIP
 * mean/std, then cut into flattened patches ordered so that each 2x2 block of
 * patches (one merged LLM token) is contiguous.
 *
 * Output rows are `channels * temporal_patch_size * patch_size^2` floats in the order
 * (channel, frame, y, x), which is the layout of the vision tower's Conv3d weight; a
 * still image is repeated across the temporal patch.
 */
import * as v from "valibot";
import { checkRgbImage, type RGBImage } from "../core/image.ts";
import { VagenError } from "../core/errors.ts";
import { resizeBicubic } from "./image-resize.ts";

const CLIP_MEAN = [0.48145466, 0.4578275, 0.40821073];
const CLIP_STD = [0.26862954, 0.26130258, 0.27577711];

/** preprocessor_config.json, as written by transformers 4.x (min/max_pixels) or 5.x (size). */
export const PreprocessorConfigSchema = v.object({
  patch_size: v.optional(v.pipe(v.number(), v.integer(), v.minValue(1)), 14),
  temporal_patch_size: v.optional(v.pipe(v.number(), v.integer(), v.minValue(1)), 2),
  merge_size: v.optional(v.pipe(v.number(), v.integer(), v.minValue(1)), 2),
  min_pixels: v.optional(v.number()),
  max_pixels: v.optional(v.number()),
  size: v.optional(
    v.object({ shortest_edge: v.optional(v.number()), longest_edge: v.optional(v.number()) }),
  ),
  image_mean: v.optional(v.tuple([v.number(), v.number(), v.number()]), CLIP_MEAN as [number, number, number]),
  image_std: v.optional(v.tuple([v.number(), v.number(), v.number()]), CLIP_STD as [number, number, number]),
  rescale_factor: v.optional(v.number(), 1 / 255),
  do_resize: v.optional(v.boolean(), true),
  do_rescale: v.optional(v.boolean(), true),
  do_normalize: v.optional(v.boolean(), true),
  resample: v.optional(v.literal(3), 3),
});

export interface ImageProcessorOptions {
  patchSize: number;
  temporalPatchSize: number;
  mergeSize: number;
  minPixels: number;
  maxPixels: number;
  mean: readonly number[];
  std: readonly number[];
  rescaleFactor: number;
  doResize: boolean;
  doRescale: boolean;
  doNormalize: boolean;
}

export const DEFAULT_IMAGE_PROCESSOR: ImageProcessorOptions = {
  patchSize: 14,
  temporalPatchSize: 2,
  mergeSize: 2,
  minPixels: 56 * 56,
  maxPixels: 28 * 28 * 1280,
  mean: CLIP_MEAN,
  std: CLIP_STD,
  rescaleFactor: 1 / 255,
  doResize: true,
  doRescale: true,
  doNormalize: true,
};

export function imageProcessorOptions(raw: v.InferOutput<typeof PreprocessorConfigSchema>): ImageProcessorOptions {
  return {
    patchSize: raw.patch_size,
    temporalPatchSize: raw.temporal_patch_size,
    mergeSize: raw.merge_size,
    minPixels: raw.min_pixels ?? raw.size?.shortest_edge ?? DEFAULT_IMAGE_PROCESSOR.minPixels,
    maxPixels: raw.max_pixels ?? raw.size?.longest_edge ?? DEFAULT_IMAGE_PROCESSOR.maxPixels,
    mean: raw.image_mean,
    std: raw.image_std,
    rescaleFactor: raw.rescale_factor,
    doResize: raw.do_resize,
    doRescale: raw.do_rescale,
    doNormalize: raw.do_normalize,
  };
}

/** Python's round(): halves go to the even neighbour. */
export function roundHalfEven(x: number): number {
  const f = Math.floor(x);
  const diff = x - f;
  if (diff > 0.5) return f + 1;
  if (diff < 0.5) return f;
  return f % 2 === 0 ? f : f + 1;
}

/**
 * Target (height, width): both multiples of `factor`, aspect ratio kept as far as
 * possible, pixel count within [minPixels, maxPixels].
 */
export function smartResize(
  height: number,
  width: number,
  factor = 28,
  minPixels = DEFAULT_IMAGE_PROCESSOR.minPixels,
  maxPixels = DEFAULT_IMAGE_PROCESSOR.maxPixels,
): [number, number] {
  if (Math.max(height, width) / Math.min(height, width) > 200) {
    throw new VagenError(
      `image of ${width}x${height}: absolute aspect ratio must be smaller than 200, got ${Math.max(height, width) / Math.min(height, width)}`,
    );
  }
  let h = Math.max(factor, roundHalfEven(height / factor) * factor);
  let w = Math.max(factor, roundHalfEven(width / factor) * factor);
  if (h * w > maxPixels) {
    const beta = Math.sqrt((height * width) / maxPixels);
    h = Math.max(factor, Math.floor(height / beta / factor) * factor);
    w = Math.max(factor, Math.floor(width / beta / factor) * factor);
  } else if (h * w < minPixels) {
    const beta = Math.sqrt(minPixels / (height * width));
    h = Math.ceil((height * beta) / factor) * factor;
    w = Math.ceil((width * beta) / factor) * factor;
  }
  return [h, w];
}

export interface ProcessedImages {
  /** (numPatches, patchDim) row-major float32. */
  pixelValues: Float32Array;
  numPatches: number;
  patchDim: number;
  /** Per image: [t, h, w] in patches. */
  gridThw: [number, number, number][];
}

/** Number of LLM tokens an image of this grid becomes after the 2x2 merge. */
export function mergedTokenCount(grid: readonly number[], mergeSize: number): number {
  return (grid[0]! * grid[1]! * grid[2]!) / (mergeSize * mergeSize);
}

/**
 * The (t, h, w) patch grid an image becomes, without touching its pixels: what the token
 * count of its placeholder needs, for a fraction of processImages' cost.
 */
export function imageGrid(img: RGBImage, opts: ImageProcessorOptions = DEFAULT_IMAGE_PROCESSOR): [number, number, number] {
  const { patchSize: ps, mergeSize: m } = opts;
  if (opts.doResize) {
    const [h, w] = smartResize(img.height, img.width, ps * m, opts.minPixels, opts.maxPixels);
    return [1, h / ps, w / ps];
  }
  if (img.height % (ps * m) || img.width % (ps * m)) {
    throw new VagenError(`image of ${img.width}x${img.height}: without resizing, both sides must be multiples of ${ps * m}`);
  }
  return [1, img.height / ps, img.width / ps];
}

export function processImages(images: readonly RGBImage[], opts: ImageProcessorOptions = DEFAULT_IMAGE_PROCESSOR): ProcessedImages {
  const { patchSize: ps, temporalPatchSize: tps } = opts;
  const patchDim = 3 * tps * ps * ps;
  const perImage: Float32Array[] = [];
  const gridThw: [number, number, number][] = [];
  let total = 0;
  for (const img of images) {
    const resized = resizeForPatches(img, opts);
    const patches = patchify(normalise(resized, opts), resized.width, resized.height, opts);
    gridThw.push([1, resized.height / ps, resized.width / ps]);
    perImage.push(patches);
    total += patches.length / patchDim;
  }
  const pixelValues = new Float32Array(total * patchDim);
  let offset = 0;
  for (const p of perImage) {
    pixelValues.set(p, offset);
    offset += p.length;
  }
  return { pixelValues, numPatches: total, patchDim, gridThw };
}

/**
 * The image at the size its patches are made from (smart_resize's, bicubic), or itself when
 * the processor does not resize (then both sides must be multiples of patch x merge).
 */
export function resizeForPatches(img: RGBImage, opts: ImageProcessorOptions): RGBImage {
  const unit = opts.patchSize * opts.mergeSize;
  checkRgbImage(img);
  if (opts.doResize) {
    const [h, w] = smartResize(img.height, img.width, unit, opts.minPixels, opts.maxPixels);
    return resizeBicubic(img, w, h);
  }
  if (img.height % unit || img.width % unit) {
    throw new VagenError(`image of ${img.width}x${img.height}: without resizing, both sides must be multiples of ${unit}`);
  }
  return img;
}

/**
 * (256 x 3) float32: entry v * 3 + c is channel c's normalised value of byte v (the RGB
 * bytes' own layout, so one gather over them reads each channel's column),
 * (v * rescale - mean) / std as transformers computes it (rescaled in float64 and stored
 * as float32, normalised in float32). A pixel's value is a function of its byte, so each
 * channel's 256 are computed once.
 */
export function normalisationTable(opts: ImageProcessorOptions): Float32Array {
  const table = new Float32Array(256 * 3);
  for (let c = 0; c < 3; c++) {
    const mean = Math.fround(opts.mean[c]!);
    const std = Math.fround(opts.std[c]!);
    for (let v = 0; v < 256; v++) {
      let x = v;
      if (opts.doRescale) x = Math.fround(x * opts.rescaleFactor);
      if (opts.doNormalize) x = Math.fround(Math.fround(x - mean) / std);
      table[v * 3 + c] = x;
    }
  }
  return table;
}

/** Channel-first float32 planes: (value * rescale - mean) / std. */
function normalise(img: RGBImage, opts: ImageProcessorOptions): Float32Array {
  const n = img.width * img.height;
  const out = new Float32Array(3 * n);
  const table = normalisationTable(opts);
  for (let c = 0; c < 3; c++) {
    for (let i = 0; i < n; i++) out[c * n + i] = table[img.data[i * 3 + c]! * 3 + c]!;
  }
  return out;
}

/**
 * Rows ordered (block row, block col, row in block, col in block): the 2x2 patches of one
 * merged token are adjacent. Each row is (channel, frame, y, x).
 */
function patchify(planes: Float32Array, width: number, height: number, opts: ImageProcessorOptions): Float32Array {
  const { patchSize: ps, temporalPatchSize: tps, mergeSize: m } = opts;
  const gh = height / ps;
  const gw = width / ps;
  const patchDim = 3 * tps * ps * ps;
  const out = new Float32Array(gh * gw * patchDim);
  const plane = width * height;
  let row = 0;
  for (let bh = 0; bh < gh / m; bh++) {
    for (let bw = 0; bw < gw / m; bw++) {
      for (let mh = 0; mh < m; mh++) {
        for (let mw = 0; mw < m; mw++) {
          const py = (bh * m + mh) * ps;
          const px = (bw * m + mw) * ps;
          let o = row * patchDim;
          for (let c = 0; c < 3; c++) {
            for (let t = 0; t < tps; t++) {
              for (let y = 0; y < ps; y++) {
                // An element loop: a subarray view for every 14 floats cost more than the copy.
                const src = c * plane + (py + y) * width + px;
                for (let x = 0; x < ps; x++) out[o + x] = planes[src + x]!;
                o += ps;
              }
            }
          }
          row++;
        }
      }
    }
  }
  return out;
}

/**
 * Each row of a training batch must hold exactly its own images' merged-token count of
 * image ids: the vision features land in batch order, so a row with too many or too few
 * would take another row's features. `grids` are every image's (t, h, w), in batch order.
 */
export function checkRowImageTokens(
  batch: { inputIds: readonly (readonly number[])[]; images: readonly (readonly unknown[])[] },
  grids: readonly (readonly number[])[],
  imageTokenId: number,
  mergeSize: number,
): void {
  let next = 0;
  batch.inputIds.forEach((ids, b) => {
    const tokens = ids.reduce((n, id) => n + (id === imageTokenId ? 1 : 0), 0);
    const rowGrids = grids.slice(next, next + batch.images[b]!.length);
    next += rowGrids.length;
    const expected = rowGrids.reduce((n, g) => n + mergedTokenCount(g, mergeSize), 0);
    if (tokens !== expected) {
      throw new VagenError(`training batch row ${b}: ${tokens} image token(s), but its ${rowGrids.length} image(s) make ${expected}`);
    }
  });
}
