/**
 * Unicode half-blocks: each character cell shows two pixels, the upper as the foreground
 * colour of `▀` and the lower as its background, in 24-bit colour. Works wherever
 * truecolour does, which covers SSH and tmux.
 */
import type { RGBImage } from "../../core/image.ts";
import { resizeNearest } from "./resize.ts";

/** The image scaled to `columns` cells wide (rows follow the aspect ratio), one string per cell row. */
export function halfBlockLines(image: RGBImage, columns: number): string[] {
  const width = Math.max(1, Math.min(Math.floor(columns), image.width * 4));
  const height = Math.max(1, Math.round((image.height * width) / image.width));
  const { data } = resizeNearest(image, width, height);
  const rgb = (i: number) => `${data[i]};${data[i + 1]};${data[i + 2]}`;
  const lines: string[] = [];
  for (let y = 0; y < height; y += 2) {
    let line = "";
    for (let x = 0; x < width; x++) {
      const top = (y * width + x) * 3;
      const bottom = y + 1 < height ? `\x1b[48;2;${rgb(top + width * 3)}m` : "\x1b[49m";
      line += `\x1b[38;2;${rgb(top)}m${bottom}▀`;
    }
    lines.push(`${line}\x1b[0m`);
  }
  return lines;
}
