import type { RGBImage } from "../../src/core/image.ts";

/** A deterministic image with every byte value in use (a 32-bit LCG's top byte per channel). */
export function noiseImage(width: number, height: number, seed: number): RGBImage {
  const data = new Uint8Array(width * height * 3);
  let x = seed;
  for (let i = 0; i < data.length; i++) {
    x = (x * 1103515245 + 12345) >>> 0;
    data[i] = x >>> 24;
  }
  return { width, height, data };
}
