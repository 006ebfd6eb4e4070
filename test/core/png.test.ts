import { expect, test } from "bun:test";
import { PNG } from "pngjs";
import { decodePng, encodePng, pngDataUrl } from "../../src/core/png.ts";

test("PNG round trip keeps every pixel", () => {
  const img = { width: 5, height: 3, data: new Uint8Array(45).map((_, i) => (i * 37) % 256) };
  const bytes = encodePng(img);
  expect([...bytes.subarray(1, 4)].map((c) => String.fromCharCode(c)).join("")).toBe("PNG");
  expect(decodePng(bytes)).toEqual(img);
  expect(pngDataUrl(img).startsWith("data:image/png;base64,iVBOR")).toBe(true);
});

test("RGBA PNGs decode to RGB by dropping alpha", () => {
  const png = new PNG({ width: 1, height: 1 });
  png.data.set([10, 20, 30, 0]);
  const decoded = decodePng(new Uint8Array(PNG.sync.write(png)));
  expect([...decoded.data]).toEqual([10, 20, 30]);
});

test("mismatched buffer sizes are rejected", () => {
  expect(() => encodePng({ width: 2, height: 2, data: new Uint8Array(5) })).toThrow(/needs 12 bytes/);
});
