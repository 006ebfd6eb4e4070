/** The PNG header check every decoder of untrusted images goes through. */
import { describe, expect, test } from "bun:test";
import { deflateSync } from "node:zlib";
import { checkPngSize, PngFormatError, PngTooLargeError, readPngSize } from "../../src/core/png-size.ts";
import { decodePng, encodePng } from "../../src/core/png.ts";
import { pngWithHeader } from "./fixtures/png-bomb.ts";

describe("PNG header check", () => {
  test("reads the size from IHDR without decoding", () => {
    const png = encodePng({ width: 7, height: 3, data: new Uint8Array(63) });
    expect(readPngSize(png)).toEqual({ width: 7, height: 3, interlaced: false });
    expect(checkPngSize(png, 21).width).toBe(7);
  });

  test("a 16000x16000 header in a tiny file is refused before decompression", () => {
    const bomb = pngWithHeader(16000, 16000, deflateSync(new Uint8Array(1000)));
    expect(bomb.length).toBeLessThan(200);
    const err = (() => {
      try {
        decodePng(bomb);
      } catch (e) {
        return e;
      }
    })() as PngTooLargeError;
    expect(err).toBeInstanceOf(PngTooLargeError);
    expect(err.message).toBe("PNG of 16000x16000 (256000000 pixels) is over the limit of 16777216 pixels");
    expect(() => decodePng(encodePng({ width: 5, height: 5, data: new Uint8Array(75) }), { maxPixels: 24 })).toThrow(/5x5 \(25 pixels\) is over the limit of 24/);
  });

  test("not a PNG, or a broken one: one clear error, no decoder internals", () => {
    expect(() => readPngSize(new TextEncoder().encode("GIF89a........................"))).toThrow(PngFormatError);
    expect(() => decodePng(new Uint8Array([0x89, 0x50, 0x4e, 0x47]))).toThrow("not a PNG image (no PNG signature)");
    expect(() => decodePng(pngWithHeader(4, 4, new Uint8Array([1, 2, 3])))).toThrow(/^broken PNG image/);
  });

  test("an interlaced image whose data inflates past its size is refused", () => {
    const bomb = pngWithHeader(8, 8, deflateSync(new Uint8Array(20_000_000)), 1);
    expect(() => decodePng(bomb)).toThrow(/interlaced image data does not fit 8x8/);
  });
});
