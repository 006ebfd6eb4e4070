/**
 * InternVL's dynamic tiling (transformers' GotOcr2ImageProcessor with crop_to_patches, which
 * InternVLProcessor always asks for): the image is resized onto the canvas of `columns x
 * rows` tiles whose aspect ratio is closest to its own (between min and max tiles), cut
 * into those tiles row by row, and, when there is more than one, followed by a thumbnail
 * of the whole image at one tile's size. Resizing is the antialiased bicubic of
 * transformers' torchvision backend on 8-bit pixels (image-resize.ts); each tile is then
 * normalised with the fused rescale + normalise: (x - mean / rescale) / (std / rescale)
 * in float32.
 *
 *   tileGrid(width, height, opts)  -> [columns, rows], which fixes the placeholder count
 *   tileImages(images, opts)       -> (tiles, 3, tileSize, tileSize) float32, channel-first
 */
import type { RGBImage } from "../../core/image.ts";
import { VagenError } from "../../core/errors.ts";
import { resizeBicubic } from "../image-resize.ts";
import type { TilingOptions } from "./config.ts";

/** Every (columns, rows) with min <= columns * rows <= max, by tile count (stable, as Python's sorted). */
function tileArrangements(minTiles: number, maxTiles: number): [number, number][] {
  const out: [number, number][] = [];
  for (let w = 1; w <= maxTiles; w++) {
    for (let h = 1; h <= maxTiles; h++) if (w * h <= maxTiles && w * h >= minTiles) out.push([w, h]);
  }
  return out.sort((a, b) => a[0] * a[1] - b[0] * b[1]);
}

/**
 * The canvas (columns, rows) whose aspect ratio is closest to the image's; on a tie the
 * later (larger) one wins while the image's area exceeds half of that canvas's.
 */
export function tileGrid(width: number, height: number, opts: TilingOptions): [number, number] {
  const aspect = width / height;
  const area = width * height;
  let bestDiff = Infinity;
  let best: [number, number] = [1, 1];
  for (const grid of tileArrangements(opts.minTiles, opts.maxTiles)) {
    const diff = Math.abs(aspect - grid[0] / grid[1]);
    if (diff < bestDiff) {
      bestDiff = diff;
      best = grid;
    } else if (diff === bestDiff && area > 0.5 * opts.tileSize * opts.tileSize * grid[0] * grid[1]) {
      best = grid;
    }
  }
  return best;
}

/** Tiles of a [columns, rows] canvas: the grid's own, plus the thumbnail when there is more than one. */
export function tileCount(grid: readonly number[]): number {
  const n = grid[0]! * grid[1]!;
  return n === 1 ? 1 : n + 1;
}

/** Floats per tile: 3 channels of tileSize^2. */
export function tileFloats(opts: TilingOptions): number {
  return 3 * opts.tileSize * opts.tileSize;
}

export interface TiledImages {
  /** (tiles, 3, tileSize, tileSize) row-major float32, every image's tiles in order. */
  pixelValues: Float32Array;
  numTiles: number;
  /** Per image: its [columns, rows] canvas. */
  grids: [number, number][];
}

export function tileImages(images: readonly RGBImage[], opts: TilingOptions): TiledImages {
  const s = opts.tileSize;
  const perImage: Float32Array[] = [];
  const grids: [number, number][] = [];
  let numTiles = 0;
  for (const image of images) {
    if (image.data.length !== image.width * image.height * 3) {
      throw new VagenError(`image of ${image.width}x${image.height}: expected ${image.width * image.height * 3} RGB bytes, got ${image.data.length}`);
    }
    const [cols, rows] = tileGrid(image.width, image.height, opts);
    const canvas = resizeBicubic(image, s * cols, s * rows);
    const n = tileCount([cols, rows]);
    const out = new Float32Array(n * tileFloats(opts));
    for (let i = 0; i < cols * rows; i++) normaliseTile(canvas, (i % cols) * s, Math.floor(i / cols) * s, opts, out, i);
    if (n > 1) normaliseTile(resizeBicubic(image, s, s), 0, 0, opts, out, n - 1);
    perImage.push(out);
    grids.push([cols, rows]);
    numTiles += n;
  }
  const pixelValues = new Float32Array(numTiles * tileFloats(opts));
  let offset = 0;
  for (const p of perImage) {
    pixelValues.set(p, offset);
    offset += p.length;
  }
  return { pixelValues, numTiles, grids };
}

/** The tile at (x0, y0) of `source`, channel-first and normalised, into tile `index` of `out`. */
function normaliseTile(source: RGBImage, x0: number, y0: number, opts: TilingOptions, out: Float32Array, index: number): void {
  const s = opts.tileSize;
  const plane = s * s;
  const base = index * 3 * plane;
  for (let c = 0; c < 3; c++) {
    // transformers scales mean and std by 1 / rescale_factor in float32, then subtracts and divides in float32.
    const scale = Math.fround(1 / opts.rescaleFactor);
    const mean = Math.fround(Math.fround(opts.mean[c]!) * scale);
    const std = Math.fround(Math.fround(opts.std[c]!) * scale);
    for (let y = 0; y < s; y++) {
      const row = ((y0 + y) * source.width + x0) * 3 + c;
      for (let x = 0; x < s; x++) out[base + c * plane + y * s + x] = Math.fround(Math.fround(source.data[row + x * 3]! - mean) / std);
    }
  }
}

/**
 * Tiles kept between training forwards, which show the same images again and again (old,
 * reference and value forwards, every update epoch, every supervised epoch): keyed by the
 * image object (a WeakMap, so an image no longer referenced takes its tiles with it), up
 * to a budget past which new images are tiled each time they come (as patch-cache.ts).
 */
const TILE_CACHE_BUDGET_BYTES = 1 << 30;
const tileCache = new WeakMap<RGBImage, { options: TilingOptions; tiled: TiledImages }>();
let tileCacheBytes = 0;
const releaseTiles = new FinalizationRegistry<number>((bytes) => (tileCacheBytes -= bytes));

/** `tileImages` of the images in order, each image tiled once while the budget lasts. */
export function tileImagesCached(images: readonly RGBImage[], opts: TilingOptions): TiledImages {
  const parts = images.map((image) => {
    const hit = tileCache.get(image);
    if (hit !== undefined && hit.options === opts) return hit.tiled;
    const tiled = tileImages([image], opts);
    const bytes = tiled.pixelValues.byteLength;
    if (hit === undefined && tileCacheBytes + bytes <= TILE_CACHE_BUDGET_BYTES) {
      tileCache.set(image, { options: opts, tiled });
      tileCacheBytes += bytes;
      releaseTiles.register(image, bytes);
    }
    return tiled;
  });
  if (parts.length === 1) return parts[0]!;
  const numTiles = parts.reduce((n, p) => n + p.numTiles, 0);
  const pixelValues = new Float32Array(numTiles * tileFloats(opts));
  let offset = 0;
  for (const p of parts) {
    pixelValues.set(p.pixelValues, offset);
    offset += p.pixelValues.length;
  }
  return { pixelValues, numTiles, grids: parts.flatMap((p) => p.grids) };
}
