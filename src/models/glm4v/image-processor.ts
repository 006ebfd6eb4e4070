/**
 * GLM-4V's image processor (transformers' Glm4vImageProcessor, also GLM-4.6V's
 * Glm46VImageProcessor): the Qwen2-VL pipeline (antialiased bicubic resize, rescale,
 * normalise with the CLIP mean/std, patches with each merged token's merge x merge patches
 * adjacent: image-processor.ts) after GLM's own smart resize, which differs from Qwen's in
 * two ways: a side shorter than patch_size * merge_size scales the image up first (aspect
 * kept), and the pixel bounds count the temporal patch's frames (a still image of h x w
 * counts temporal_patch_size * h * w against min and max).
 */
import type { RGBImage } from "../../core/image.ts";
import { VagenError } from "../../core/errors.ts";
import { processImages, roundHalfEven, type ImageProcessorOptions, type ProcessedImages } from "../image-processor.ts";
import { resizeBicubic } from "../image-resize.ts";
import { processImagesCached } from "../patch-cache.ts";

/**
 * transformers' glm4v smart_resize for a still image (num_frames = temporal_factor):
 * target (height, width), multiples of `factor`, within [minPixels, maxPixels] counted over
 * `temporalFactor` frames.
 */
export function glm4vSmartResize(height: number, width: number, factor: number, temporalFactor: number, minPixels: number, maxPixels: number): [number, number] {
  let h = height;
  let w = width;
  if (h < factor || w < factor) {
    const scale = Math.max(factor / h, factor / w);
    h = Math.trunc(h * scale);
    w = Math.trunc(w * scale);
  }
  if (Math.max(h, w) / Math.min(h, w) > 200) {
    throw new VagenError(`image of ${width}x${height}: absolute aspect ratio must be smaller than 200, got ${Math.max(h, w) / Math.min(h, w)}`);
  }
  let hBar = roundHalfEven(h / factor) * factor;
  let wBar = roundHalfEven(w / factor) * factor;
  const frames = temporalFactor;
  const tBar = roundHalfEven(frames / temporalFactor) * temporalFactor;
  if (tBar * hBar * wBar > maxPixels) {
    const beta = Math.sqrt((frames * h * w) / maxPixels);
    hBar = Math.max(factor, Math.floor(h / beta / factor) * factor);
    wBar = Math.max(factor, Math.floor(w / beta / factor) * factor);
  } else if (tBar * hBar * wBar < minPixels) {
    const beta = Math.sqrt(minPixels / (frames * h * w));
    hBar = Math.ceil((h * beta) / factor) * factor;
    wBar = Math.ceil((w * beta) / factor) * factor;
  }
  return [hBar, wBar];
}

/** The (t, h, w) patch grid an image becomes, without touching its pixels. */
export function glm4vImageGrid(image: RGBImage, opts: ImageProcessorOptions): [number, number, number] {
  const [h, w] = targetSize(image, opts);
  return [1, h / opts.patchSize, w / opts.patchSize];
}

/** Resized images by their source (WeakMap: they go with it), so cached patches are found again. */
const resizedOf = new WeakMap<RGBImage, { opts: ImageProcessorOptions; image: RGBImage }>();

/** Each image at GLM's target size (the same object when it already is). */
function resized(image: RGBImage, opts: ImageProcessorOptions): RGBImage {
  const hit = resizedOf.get(image);
  if (hit && hit.opts === opts) return hit.image;
  const [h, w] = targetSize(image, opts);
  const out = h === image.height && w === image.width ? image : resizeBicubic(image, w, h);
  resizedOf.set(image, { opts, image: out });
  return out;
}

function targetSize(image: RGBImage, opts: ImageProcessorOptions): [number, number] {
  if (!opts.doResize) return [image.height, image.width];
  return glm4vSmartResize(image.height, image.width, opts.patchSize * opts.mergeSize, opts.temporalPatchSize, opts.minPixels, opts.maxPixels);
}

/** The shared pipeline's options once GLM has resized: no resize of its own. */
const noResize = new WeakMap<ImageProcessorOptions, ImageProcessorOptions>();
function withoutResize(opts: ImageProcessorOptions): ImageProcessorOptions {
  let o = noResize.get(opts);
  if (!o) noResize.set(opts, (o = { ...opts, doResize: false }));
  return o;
}

/** Pixel values and grids of the images, as Glm4vImageProcessor gives them. */
export function processGlm4vImages(images: readonly RGBImage[], opts: ImageProcessorOptions): ProcessedImages {
  return processImages(
    images.map((image) => resized(image, opts)),
    withoutResize(opts),
  );
}

/** `processGlm4vImages`, each image's patches made once while the patch cache's budget lasts (patch-cache.ts). */
export function processGlm4vImagesCached(images: readonly RGBImage[], opts: ImageProcessorOptions): ProcessedImages {
  return processImagesCached(
    images.map((image) => resized(image, opts)),
    withoutResize(opts),
  );
}
