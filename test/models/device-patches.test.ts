import { describe, expect, test } from "bun:test";
import * as torch from "../../src/torch/index.ts";
import { DEFAULT_IMAGE_PROCESSOR, processImages, resizeForPatches, type ImageProcessorOptions } from "../../src/models/image-processor.ts";
import { patchesOnDevice } from "../../src/models/device-patches.ts";
import type { RGBImage } from "../../src/core/image.ts";
import { noiseImage } from "./noise-image.ts";

const resizeAll = (images: RGBImage[], opts: ImageProcessorOptions) => images.map((img) => resizeForPatches(img, opts));

describe("patchesOnDevice", () => {
  const cases = [
    { name: "a Sokoban render at 28 px a cell (96 x 96 -> 168 x 168)", images: [noiseImage(96, 96, 1), noiseImage(96, 96, 2), noiseImage(96, 96, 3)], opts: { ...DEFAULT_IMAGE_PROCESSOR, minPixels: 168 * 168, maxPixels: 168 * 168 + 28 * 12 + 1 } },
    // 300 x 168 x 168 pixels is past one pass's 2^23: two passes, joined in order.
    { name: "300 renders, more pixels than one pass takes", images: Array.from({ length: 300 }, (_, i) => noiseImage(96, 96, 10 + i)), opts: { ...DEFAULT_IMAGE_PROCESSOR, minPixels: 168 * 168, maxPixels: 168 * 168 + 28 * 12 + 1 } },
    { name: "mixed sizes, non-square, in one call", images: [noiseImage(64, 40, 4), noiseImage(200, 120, 5), noiseImage(64, 40, 6), noiseImage(30, 90, 7)], opts: DEFAULT_IMAGE_PROCESSOR },
    // 640 x 480 into at most 112 x 112 pixels: shrinking widens the kernel to 25 taps and more.
    { name: "a large image shrunk to a small budget", images: [noiseImage(640, 480, 9), noiseImage(640, 480, 11)], opts: { ...DEFAULT_IMAGE_PROCESSOR, minPixels: 56 * 56, maxPixels: 112 * 112 } },
    { name: "no resizing, merge 1, temporal patch 1", images: [noiseImage(28, 42, 8)], opts: { ...DEFAULT_IMAGE_PROCESSOR, doResize: false, mergeSize: 1, temporalPatchSize: 1 } },
  ];
  for (const [c, resize] of cases.flatMap((c) => (["host", "device"] as const).map((r) => [c, r] as const))) {
    test(`${c.name}, resized on the ${resize}: exactly processImages's values, rows and grids`, () => {
      const want = processImages(c.images, c.opts);
      const got = resize === "host" ? patchesOnDevice(resizeAll(c.images, c.opts), c.opts, "cpu") : patchesOnDevice(c.images, c.opts, "cpu", { resize: "device" });
      expect(got.gridThw).toEqual(want.gridThw);
      expect(got.pixels.shape).toEqual([want.numPatches, want.patchDim]);
      const values = got.pixels.toFloat32Array();
      let differing = 0;
      for (let i = 0; i < values.length; i++) if (values[i] !== want.pixelValues[i]) differing++;
      expect(differing).toBe(0);
      got.pixels.dispose();
    });
  }

  test("an image whose bytes do not match its size is refused, naming both", () => {
    const bad = { width: 4, height: 4, data: new Uint8Array(10) };
    expect(() => resizeAll([bad], DEFAULT_IMAGE_PROCESSOR)).toThrow(/4x4: expected 48 RGB bytes, got 10/);
    expect(() => patchesOnDevice([noiseImage(56, 56, 1), bad], DEFAULT_IMAGE_PROCESSOR, "cpu", { resize: "device" })).toThrow(/4x4: expected 48 RGB bytes, got 10/);
  });
});
