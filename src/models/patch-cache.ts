/**
 * Image patches kept between training forwards. Training shows the same images again and
 * again (a supervised run every epoch, an RL step in its old, reference and value
 * forwards and every update epoch), and resizing and patching them each time costs more
 * than the vision tower. Images are never changed once made, so their patches are kept,
 * keyed by the image object (a WeakMap: an image no longer referenced takes its patches
 * with it), up to a budget: float patches take about 1.5 times the bytes of the 256 x 256
 * render they come from (0.3 MB a 4x4 FrozenLake board), and with every image's kept
 * 12,299 supervised samples grew to 12 GB. Past the budget new images are patched each
 * time they come; no eviction, because epochs visit samples in a cycle and an LRU would
 * then never hit. An image is cached under one set of options.
 */
import type { RGBImage } from "../core/image.ts";
import { LruMap } from "../core/lru.ts";
import { imageKey } from "./image-key.ts";
import { processImages, resizeForPatches, type ImageProcessorOptions, type ProcessedImages } from "./image-processor.ts";

const PATCH_CACHE_BUDGET_BYTES = 1 << 30;

const patchCache = new WeakMap<RGBImage, { options: ImageProcessorOptions; processed: ProcessedImages }>();
let patchCacheBytes = 0;
const releaseCached = new FinalizationRegistry<number>((bytes) => (patchCacheBytes -= bytes));

/** `processImages` of the images in order, each image's patches made once while the budget lasts. */
export function processImagesCached(images: readonly RGBImage[], options: ImageProcessorOptions): ProcessedImages {
  if (images.length === 0) return processImages([], options);
  const parts = images.map((image) => {
    const hit = patchCache.get(image);
    if (hit !== undefined && hit.options === options) return hit.processed;
    const processed = processImages([image], options);
    if (hit === undefined && patchCacheBytes + processed.pixelValues.byteLength <= PATCH_CACHE_BUDGET_BYTES) {
      patchCache.set(image, { options, processed });
      patchCacheBytes += processed.pixelValues.byteLength;
      releaseCached.register(image, processed.pixelValues.byteLength);
    }
    return processed;
  });
  if (parts.length === 1) return parts[0]!;
  const numPatches = parts.reduce((n, p) => n + p.numPatches, 0);
  const pixelValues = new Float32Array(numPatches * parts[0]!.patchDim);
  let offset = 0;
  for (const p of parts) {
    pixelValues.set(p.pixelValues, offset);
    offset += p.pixelValues.length;
  }
  return { pixelValues, numPatches, patchDim: parts[0]!.patchDim, gridThw: parts.flatMap((p) => p.gridThw) };
}

const resizedCache = new WeakMap<RGBImage, { options: ImageProcessorOptions; resized: RGBImage }>();
let resizedCacheBytes = 0;
const releaseResized = new FinalizationRegistry<number>((bytes) => (resizedCacheBytes -= bytes));

/**
 * Resized images by their pixels (`imageKey`), least recently used first, per set of
 * options. Renders repeat: a rollout step's eight episodes of a level start from one room,
 * a room's later states recur across them, and a policy that bumps into a wall sees the
 * same image again. One resize then serves every copy; eviction is by age because a
 * rollout's images are new each step. Keys name the options (an id per options object)
 * and the pixels, in one map under one budget of 256 MB.
 */
const resizedByContent = new LruMap<string, RGBImage>(256 << 20, (image) => image.data.byteLength);
const optionsIds = new WeakMap<ImageProcessorOptions, number>();
let nextOptionsId = 0;

function resizeByContent(image: RGBImage, options: ImageProcessorOptions): RGBImage {
  let id = optionsIds.get(options);
  if (id === undefined) optionsIds.set(options, (id = nextOptionsId++));
  return resizedByContent.getOrMake(`${id}/${imageKey(image)}`, () => resizeForPatches(image, options));
}

/**
 * `resizeForPatches` of the images in order, each resized once: the cache for families
 * that make patches on the device (device-patches.ts), used by the engine's prefill and
 * the training forward alike, so a rollout's images are resized once for both. An image
 * object is looked up first (kept while the budget lasts, the resized bytes an eighth of
 * the float patches' size, so the same budget holds eight times the images), then its
 * pixels (`resizeByContent`). The returned images are shared: never write to them.
 */
export function resizeImagesCached(images: readonly RGBImage[], options: ImageProcessorOptions): RGBImage[] {
  return images.map((image) => {
    const hit = resizedCache.get(image);
    if (hit !== undefined && hit.options === options) return hit.resized;
    const resized = options.doResize ? resizeByContent(image, options) : resizeForPatches(image, options);
    if (hit === undefined && resizedCacheBytes + resized.data.byteLength <= PATCH_CACHE_BUDGET_BYTES) {
      resizedCache.set(image, { options, resized });
      resizedCacheBytes += resized.data.byteLength;
      releaseResized.register(image, resized.data.byteLength);
    }
    return resized;
  });
}
