import { describe, expect, test } from "bun:test";
import { join } from "node:path";
import { processImages, roundHalfEven, smartResize, DEFAULT_IMAGE_PROCESSOR, mergedTokenCount } from "../../src/models/image-processor.ts";
import { resizeBicubic } from "../../src/models/image-resize.ts";
import { readPng } from "../../src/models/image-io.ts";
import { FIXTURE_DIR, ref, refsJson } from "./fixture.ts";

describe("smartResize", () => {
  test("matches transformers' smart_resize on the fixture's table", () => {
    for (const row of refsJson().smart_resize) {
      if (row.error) {
        expect(() => smartResize(row.height, row.width)).toThrow(/aspect ratio/);
      } else {
        expect(smartResize(row.height, row.width)).toEqual(row.resized!);
      }
    }
  });

  test("rounds halves to even like Python", () => {
    expect([0.5, 1.5, 2.5, 3.5, -1.5].map(roundHalfEven)).toEqual([0, 2, 2, 4, -2]);
    // 42 / 28 = 1.5 -> 2 and 70 / 28 = 2.5 -> 2: both sides become 56.
    expect(smartResize(42, 70)).toEqual([56, 56]);
  });
});

describe("resizeBicubic", () => {
  test("keeps a constant image constant and returns a copy at the same size", () => {
    const img = { width: 9, height: 7, data: new Uint8Array(9 * 7 * 3).fill(77) };
    for (const [w, h] of [[4, 3], [20, 15], [9, 7]] as const) {
      const out = resizeBicubic(img, w, h);
      expect(out.data.length).toBe(w * h * 3);
      expect(out.data.every((x) => x === 77)).toBe(true);
    }
    expect(resizeBicubic(img, 9, 7).data).not.toBe(img.data);
  });

  test("torch and Pillow flavours differ only by their fixed-point rounding", () => {
    // A gradient with sharp edges, shrunk and enlarged: both flavours run the same
    // kernel, so they agree to within one step, on a small share of the values.
    const w = 23, h = 17;
    const data = new Uint8Array(w * h * 3);
    for (let i = 0; i < data.length; i++) data[i] = (i * 37 + (i % 3) * 90) % 256;
    const img = { width: w, height: h, data };
    for (const [ow, oh] of [[11, 8], [40, 30]] as const) {
      const t = resizeBicubic(img, ow, oh, "torch").data;
      const p = resizeBicubic(img, ow, oh, "pillow").data;
      let differing = 0;
      for (let i = 0; i < t.length; i++) {
        expect(Math.abs(t[i]! - p[i]!)).toBeLessThanOrEqual(1);
        if (t[i] !== p[i]) differing++;
      }
      expect(differing / t.length).toBeLessThan(0.1);
    }
  });
});

describe("processImages", () => {
  const refs = refsJson();
  const load = (key: string) => readPng(join(FIXTURE_DIR, refs.images[key]!.file));

  /** Per-value differences between our pixel values and transformers', in uint8 steps. */
  function uint8Steps(caseName: string, keys: readonly string[]): number[] {
    const out = processImages(keys.map(load), DEFAULT_IMAGE_PROCESSOR);
    const expected = ref(`${caseName}.pixel_values`);
    expect(out.gridThw.flat()).toEqual(Array.from(ref(`${caseName}.image_grid_thw`).values));
    expect([out.numPatches, out.patchDim]).toEqual(expected.shape);
    const std = DEFAULT_IMAGE_PROCESSOR.std;
    const perChannel = out.patchDim / 3;
    return Array.from(out.pixelValues, (x, i) =>
      Math.round(Math.abs(x - expected.values[i]!) * std[Math.floor((i % out.patchDim) / perChannel)]! * 255),
    );
  }

  test("matches transformers exactly when no resize is needed", () => {
    const out = processImages([load("a")], DEFAULT_IMAGE_PROCESSOR);
    const expected = ref("one_image.pixel_values");
    let maxDiff = 0;
    for (let i = 0; i < expected.values.length; i++) maxDiff = Math.max(maxDiff, Math.abs(out.pixelValues[i]! - expected.values[i]!));
    expect(maxDiff).toBeLessThan(1e-5);
    expect(uint8Steps("one_image", ["a"]).every((d) => d === 0)).toBe(true);
  });

  test("resizes exactly like transformers (torch's uint8 antialiased bicubic)", () => {
    const steps = uint8Steps("two_images", ["b", "c"]);
    expect(steps.filter((d) => d !== 0)).toHaveLength(0);
  });

  test("counts merged tokens per image", () => {
    expect(mergedTokenCount([1, 10, 12], 2)).toBe(30);
  });

  test("rejects a buffer whose size does not match the image", () => {
    expect(() => processImages([{ width: 2, height: 2, data: new Uint8Array(5) }])).toThrow(/RGB bytes/);
  });
});
