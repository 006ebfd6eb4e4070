/** Reading images from disk into the env contract's RGBImage (PNG via pngjs). */
import { readFileSync } from "node:fs";
import { PNG } from "pngjs";
import type { RGBImage } from "../core/image.ts";
import { VagenError } from "../core/errors.ts";

/** Decode a PNG file to 8-bit RGB; alpha is dropped, as Pillow's convert("RGB") does. */
export function readPng(path: string): RGBImage {
  let png: PNG;
  try {
    png = PNG.sync.read(readFileSync(path));
  } catch (e) {
    throw new VagenError(`${path}: cannot read as PNG (${(e as Error).message})`, "only PNG images are supported");
  }
  const { width, height, data: rgba } = png;
  const data = new Uint8Array(width * height * 3);
  for (let i = 0, j = 0; i < width * height; i++, j += 4) {
    data[i * 3] = rgba[j]!;
    data[i * 3 + 1] = rgba[j + 1]!;
    data[i * 3 + 2] = rgba[j + 2]!;
  }
  return { width, height, data };
}
