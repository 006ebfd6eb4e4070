/**
 * DEC sixel graphics (xterm -ti vt340, foot, mlterm, WezTerm, Windows Terminal): the
 * image in bands six pixels tall, each band one run-length-encoded line per colour.
 * Colours are quantized to a 6x6x6 cube (216 registers), plenty for env renders.
 * https://vt100.net/docs/vt3xx-gp/chapter14.html
 */
import type { RGBImage } from "../../core/image.ts";

const LEVELS = 6;

/** Index into the 6x6x6 colour cube of an 8-bit RGB triple. */
function cubeIndex(r: number, g: number, b: number): number {
  const q = (v: number) => Math.round((v / 255) * (LEVELS - 1));
  return q(r) * LEVELS * LEVELS + q(g) * LEVELS + q(b);
}

/** `count` repeats of one sixel character, run-length encoded when that is shorter. */
function run(char: string, count: number): string {
  return count > 3 ? `!${count}${char}` : char.repeat(count);
}

export function sixelImage(image: RGBImage): string {
  const { width, height, data } = image;
  const colours = new Int16Array(width * height);
  for (let i = 0; i < width * height; i++) colours[i] = cubeIndex(data[i * 3]!, data[i * 3 + 1]!, data[i * 3 + 2]!);
  const used = [...new Set(colours)].sort((a, b) => a - b);
  // Raster attributes: 1:1 pixel aspect, then the size.
  let out = `\x1bPq"1;1;${width};${height}`;
  for (const c of used) {
    const level = (v: number) => Math.round((v * 100) / (LEVELS - 1));
    out += `#${c};2;${level(Math.floor(c / 36))};${level(Math.floor(c / 6) % 6)};${level(c % 6)}`;
  }
  for (let top = 0; top < height; top += 6) {
    const lines: string[] = [];
    for (const c of used) {
      let line = "";
      let previous = "";
      let count = 0;
      let any = false;
      for (let x = 0; x < width; x++) {
        let bits = 0;
        for (let dy = 0; dy < 6 && top + dy < height; dy++) if (colours[(top + dy) * width + x] === c) bits |= 1 << dy;
        if (bits) any = true;
        const char = String.fromCharCode(63 + bits);
        if (char === previous) count++;
        else {
          line += run(previous, count);
          previous = char;
          count = 1;
        }
      }
      if (any) lines.push(`#${c}${line}${run(previous, count)}`);
    }
    // `$` returns to the band's start for the next colour; `-` moves to the next band.
    out += `${lines.join("$")}-`;
  }
  return `${out}\x1b\\`;
}
