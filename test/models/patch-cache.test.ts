import { describe, expect, test } from "bun:test";
import type { RGBImage } from "../../src/core/image.ts";
import { DEFAULT_IMAGE_PROCESSOR, resizeForPatches, type ImageProcessorOptions } from "../../src/models/image-processor.ts";
import { resizeImagesCached } from "../../src/models/patch-cache.ts";
import { noiseImage } from "./noise-image.ts";

// 96 x 96 renders resized up to 168 x 168, as the Sokoban demo's 28-px cells are.
const OPTS: ImageProcessorOptions = { ...DEFAULT_IMAGE_PROCESSOR, minPixels: 168 * 168, maxPixels: 168 * 168 + 28 * 12 + 1 };

describe("resizeImagesCached", () => {
  test("equals resizeForPatches for every image, in order", () => {
    const images = [noiseImage(96, 96, 1), noiseImage(96, 96, 2), noiseImage(64, 80, 3)];
    const got = resizeImagesCached(images, OPTS);
    expect(got.map((r) => [r.width, r.height])).toEqual(images.map((img) => [resizeForPatches(img, OPTS).width, resizeForPatches(img, OPTS).height]));
    expect([got[0]!.width, got[0]!.height]).toEqual([168, 168]);
    for (const [i, img] of images.entries()) expect(got[i]!.data).toEqual(resizeForPatches(img, OPTS).data);
  });

  test("equal pixels in distinct objects share one resize; different pixels or options do not", () => {
    const a = noiseImage(96, 96, 7);
    const twin: RGBImage = { width: 96, height: 96, data: new Uint8Array(a.data) };
    const [ra, rTwin] = resizeImagesCached([a, twin], OPTS);
    expect(rTwin).toBe(ra!);
    const other: RGBImage = { width: 96, height: 96, data: new Uint8Array(a.data) };
    other.data[5] = (other.data[5]! + 1) % 256;
    const [rOther] = resizeImagesCached([other], OPTS);
    expect(rOther).not.toBe(ra!);
    expect(rOther!.data).toEqual(resizeForPatches(other, OPTS).data);
    // Another set of options (a larger target size) resizes again, to its own size.
    const larger: ImageProcessorOptions = { ...OPTS, minPixels: 196 * 196, maxPixels: 196 * 196 + 28 * 14 + 1 };
    const [rLarger] = resizeImagesCached([twin], larger);
    expect([rLarger!.width, rLarger!.height]).toEqual([196, 196]);
    expect(rLarger!.data).toEqual(resizeForPatches(twin, larger).data);
  });

  test("without resizing, an image is its own patch source", () => {
    const opts: ImageProcessorOptions = { ...OPTS, doResize: false };
    const a = noiseImage(56, 28, 9);
    expect(resizeImagesCached([a], opts)[0]).toBe(a);
  });
});
