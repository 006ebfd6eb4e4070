/**
 * The image processor's patches made on the device from the resized images' bytes.
 *
 * `processImages` (image-processor.ts) writes float32 patches on the host: 8 times the
 * resized image's bytes (4 bytes a value, each frame twice for the temporal patch), all
 * of them copied into one array and then to the device. Here only the resized bytes
 * travel; normalisation is a lookup in the same float32 table (`normalisationTable`) and
 * patching a reshape and permute, so the values are exactly `processImages`'s (tested).
 * Images of one size, the usual rollout, are patched in one pass.
 */
import type { RGBImage } from "../core/image.ts";
import * as torch from "../torch/index.ts";
import type { Tensor } from "../torch/index.ts";
import { normalisationTable, type ImageProcessorOptions } from "./image-processor.ts";

export interface DevicePatches {
  /** (numPatches, 3 * temporalPatch * patch^2) float32 on the device, rows as `processImages` orders them. */
  pixels: Tensor;
  /** Per image [t, h, w] in patches. */
  gridThw: [number, number, number][];
}

/**
 * Patches of `resized` (images already at their patch size: image-processor.ts
 * `resizeForPatches`, or patch-cache.ts `resizeImagesCached`) on `device`.
 */
export function patchesOnDevice(resized: readonly RGBImage[], opts: ImageProcessorOptions, device: string): DevicePatches {
  const { patchSize: ps, temporalPatchSize: tps, mergeSize: m } = opts;
  const gridThw = patchGrids(resized, opts);
  return torch.tidy(() => {
    // Gathering along the (256, 3) table's rows with the (pixels, 3) bytes reads each
    // channel's own column.
    const table = torch.tensor(normalisationTable(opts), [256, 3], { device });
    const parts: Tensor[] = [];
    for (const run of runsOfOneSize(resized)) {
      const { width: w, height: h } = run[0]!;
      const bytes = new Uint8Array(run.length * h * w * 3);
      run.forEach((img, i) => bytes.set(img.data, i * h * w * 3));
      const index = torch.tensor(bytes, [run.length * h * w, 3], { dtype: "u8", device }).to("i64");
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

/** [t, h, w] in patches of each image at its patch size (`resizeForPatches`'s output). */
export function patchGrids(resized: readonly RGBImage[], opts: ImageProcessorOptions): [number, number, number][] {
  return resized.map((img) => [1, img.height / opts.patchSize, img.width / opts.patchSize]);
}

/**
 * Pixels one pass may take: its int64 byte index is 24 bytes a pixel (192 MiB here), so a
 * batch of large images goes in several passes.
 */
const PASS_PIXELS = 1 << 23;

/** Consecutive runs of images of one size, in order, each of at most PASS_PIXELS pixels (or one image). */
function runsOfOneSize(images: readonly RGBImage[]): RGBImage[][] {
  const runs: RGBImage[][] = [];
  for (const img of images) {
    const run = runs.at(-1);
    const first = run?.[0];
    const fits = first !== undefined && first.width === img.width && first.height === img.height && (run!.length + 1) * img.width * img.height <= PASS_PIXELS;
    if (fits) run!.push(img);
    else runs.push([img]);
  }
  return runs;
}
