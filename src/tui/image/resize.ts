import type { RGBImage } from "../../core/image.ts";

/** Nearest-neighbour resize (pixel-art observations stay crisp). */
export function resizeNearest(src: RGBImage, width: number, height: number): RGBImage {
  if (width === src.width && height === src.height) return src;
  const out: RGBImage = { width, height, data: new Uint8Array(width * height * 3) };
  for (let y = 0; y < height; y++) {
    const sy = Math.min(src.height - 1, Math.floor(((y + 0.5) * src.height) / height));
    for (let x = 0; x < width; x++) {
      const sx = Math.min(src.width - 1, Math.floor(((x + 0.5) * src.width) / width));
      out.data.set(src.data.subarray((sy * src.width + sx) * 3, (sy * src.width + sx) * 3 + 3), (y * width + x) * 3);
    }
  }
  return out;
}
