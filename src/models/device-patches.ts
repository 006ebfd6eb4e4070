/**
 * The image processor's patches made on the device from the resized images' bytes.
 *
 * `processImages` (image-processor.ts) writes float32 patches on the host: 8 times the
 * resized image's bytes (4 bytes a value, each frame twice for the temporal patch), all
 * of them copied into one array and then to the device. Here only the resized bytes
 * travel; normalisation is a lookup in the same float32 table (`normalisationTable`) and
 * patching a reshape and permute, so the values are exactly `processImages`'s (tested).
 * Images of one size, the usual rollout, are patched in one pass.
 *
 * On a GPU the resize itself can run there too (`resize: "device"`): each pass of the
 * separable bicubic filter is a product with a dense matrix of its fixed-point weights
 * (image-resize.ts `resizeWeightMatrix`), in float64, where every sum of these integers is
 * exact, then the host's rounding and clipping. Then only the render's own bytes leave the
 * host, and no host time goes to resizing (the JS resize was the largest host cost left
 * per image). On a CPU the dense products cost more than the host's four-tap loops.
 */
import { checkRgbImage, type RGBImage } from "../core/image.ts";
import * as torch from "../torch/index.ts";
import type { Tensor } from "../torch/index.ts";
import { imageGrid, normalisationTable, type ImageProcessorOptions } from "./image-processor.ts";
import { resizeWeightMatrix } from "./image-resize.ts";

export interface DevicePatches {
  /** (numPatches, 3 * temporalPatch * patch^2) float32 on the device, rows as `processImages` orders them. */
  pixels: Tensor;
  /** Per image [t, h, w] in patches. */
  gridThw: [number, number, number][];
}

/**
 * Patches of `images` on `device`. With `resize: "host"` (the default) the images are
 * already at their patch size (image-processor.ts `resizeForPatches`, or patch-cache.ts
 * `resizeImagesCached`); with `resize: "device"` they are the originals, resized here as
 * `resizeForPatches` would.
 */
export function patchesOnDevice(images: readonly RGBImage[], opts: ImageProcessorOptions, device: string, how: { resize?: "host" | "device" } = {}): DevicePatches {
  const { patchSize: ps, temporalPatchSize: tps, mergeSize: m } = opts;
  const onDevice = how.resize === "device";
  // The host resize checks each image's bytes; here they go to the device as they are.
  if (onDevice) for (const img of images) checkRgbImage(img);
  const gridThw = onDevice ? images.map((img) => imageGrid(img, opts)) : patchGrids(images, opts);
  return torch.tidy(() => {
    // Gathering along the (256, 3) table's rows with the (pixels, 3) bytes reads each
    // channel's own column.
    const table = torch.tensor(normalisationTable(opts), [256, 3], { device });
    const parts: Tensor[] = [];
    for (const { images: run, first } of runsOfOneSize(images, (i) => [gridThw[i]![1] * ps, gridThw[i]![2] * ps])) {
      const { width: w0, height: h0 } = images[first]!;
      const [, gh, gw] = gridThw[first]!;
      const [h, w] = [gh * ps, gw * ps];
      const bytes = new Uint8Array(run.length * h0 * w0 * 3);
      run.forEach((img, i) => bytes.set(img.data, i * h0 * w0 * 3));
      const raw = torch.tensor(bytes, [run.length, h0, w0, 3], { dtype: "u8", device });
      const sized = onDevice && (h !== h0 || w !== w0) ? resizeBytes(raw, h, w) : raw;
      const index = sized.to("i64").reshape([run.length * h * w, 3]);
      const values = table.gather(0, index).reshape([run.length, h, w, 3]);
      // (N, H, W, C) -> (N, bh, mh, y, bw, mw, x, C) -> rows (N, bh, bw, mh, mw), each (C, t, y, x).
      const blocks = values.reshape([run.length, h / ps / m, m, ps, w / ps / m, m, ps, 3]).permute([0, 1, 4, 2, 5, 7, 3, 6]);
      const rows = blocks.unsqueeze(6).expand([run.length, h / ps / m, w / ps / m, m, m, 3, tps, ps, ps]);
      parts.push(rows.reshape([-1, 3 * tps * ps * ps]));
    }
    const pixels = parts.length === 1 ? parts[0]!.contiguous() : torch.cat(parts, 0);
    return { pixels, gridThw };
  });
}

/**
 * (N, H, W, 3) bytes resized to (N, height, width, 3), as image-resize.ts `resizeBicubic`
 * does it: the horizontal pass first, each pass rounded and clipped to 0..255. Values are
 * whole numbers in float64; every product and sum stays below 2^53 (weights below 2^22,
 * bytes below 2^8, a few hundred taps at most), so the products are exact.
 */
export function resizeBytes(bytes: Tensor, height: number, width: number): Tensor {
  const [, H, W] = bytes.shape as [number, number, number, number];
  let x = bytes.to("f64");
  // Along W: (N, H, 3, W) @ (W, width).
  if (width !== W) x = resizeLastAxis(x.permute([0, 1, 3, 2]), W, width).permute([0, 1, 3, 2]);
  // Along H: (N, width, 3, H) @ (H, height).
  if (height !== H) x = resizeLastAxis(x.permute([0, 2, 3, 1]), H, height).permute([0, 3, 1, 2]);
  return x;
}

function resizeLastAxis(x: Tensor, inSize: number, outSize: number): Tensor {
  const { matrix, precision } = resizeWeightMatrix(inSize, outSize);
  const weights = torch.tensor(matrix, [outSize, inSize], { dtype: "f64", device: x.device });
  // clip8: floor((acc + 2^(p-1)) / 2^p), clamped to a byte; dividing by a power of two is exact.
  return x.matmul(weights.t()).add(2 ** (precision - 1)).div(2 ** precision).floor().clamp(0, 255);
}

/** [t, h, w] in patches of each image at its patch size (`resizeForPatches`'s output). */
export function patchGrids(resized: readonly RGBImage[], opts: ImageProcessorOptions): [number, number, number][] {
  return resized.map((img) => [1, img.height / opts.patchSize, img.width / opts.patchSize]);
}

/**
 * Pixels one pass may take: its int64 byte index is 24 bytes a pixel (192 MiB here), so a
 * batch of large images goes in several passes.
 */
const PASS_PIXELS = 1 << 23;

/**
 * Consecutive runs of images of one size and one patched size (`patchedOf`: [h, w] in
 * pixels), in order, with the index of each run's first image; each run of at most
 * PASS_PIXELS pixels before or after resizing (or one image).
 */
function runsOfOneSize(images: readonly RGBImage[], patchedOf: (i: number) => readonly [number, number]): { images: RGBImage[]; first: number }[] {
  const runs: { images: RGBImage[]; first: number }[] = [];
  images.forEach((img, i) => {
    const run = runs.at(-1);
    const [h, w] = patchedOf(i);
    const pixels = Math.max(h * w, img.width * img.height);
    const head = run && images[run.first]!;
    const headPatched = run && patchedOf(run.first);
    const fits =
      run !== undefined &&
      head!.width === img.width &&
      head!.height === img.height &&
      headPatched![0] === h &&
      headPatched![1] === w &&
      (run.images.length + 1) * pixels <= PASS_PIXELS;
    if (fits) run.images.push(img);
    else runs.push({ images: [img], first: i });
  });
  return runs;
}
