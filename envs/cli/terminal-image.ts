/**
 * Draws an RGB image in a terminal with half-block characters: each character cell shows
 * two pixels, the upper as the foreground colour of `▀` and the lower as its background,
 * in 24-bit colour. Images wider than `maxColumns` are scaled down (nearest neighbour).
 */
import { resizeNearest } from "../_common/image.ts";
import type { RGBImage } from "../../src/core/image.ts";

export function halfBlockLines(image: RGBImage, maxColumns: number): string[] {
  const columns = Math.max(1, Math.min(maxColumns, image.width));
  const scaled = columns === image.width ? image : resizeNearest(image, columns, Math.max(1, Math.round((image.height * columns) / image.width)));
  const { width, height, data } = scaled;
  const lines: string[] = [];
  for (let y = 0; y < height; y += 2) {
    let line = "";
    for (let x = 0; x < width; x++) {
      const top = (y * width + x) * 3;
      line += `\x1b[38;2;${data[top]};${data[top + 1]};${data[top + 2]}m`;
      if (y + 1 < height) {
        const bottom = ((y + 1) * width + x) * 3;
        line += `\x1b[48;2;${data[bottom]};${data[bottom + 1]};${data[bottom + 2]}m▀`;
      } else {
        line += "\x1b[49m▀";
      }
    }
    lines.push(`${line}\x1b[0m`);
  }
  return lines;
}
