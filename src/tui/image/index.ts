/**
 * Drawing an observation image in the terminal: half-block lines Ink lays out like any
 * text, or an escape sequence for kitty / iTerm2 / sixel that is written at the place
 * kept free for it (see components/image-view.tsx). Decoded PNGs are cached by path.
 */
import { readFileSync } from "node:fs";
import type { RGBImage } from "../../core/image.ts";
import { decodePng, encodePng } from "../../core/png.ts";
import { halfBlockLines } from "./half-blocks.ts";
import { iterm2Image } from "./iterm2.ts";
import { kittyImage } from "./kitty.ts";
import { type ImageProtocol, cellSize } from "./protocol.ts";
import { resizeNearest } from "./resize.ts";
import { sixelImage } from "./sixel.ts";

export { detectImageProtocol, resolveImageMode } from "./detect.ts";
export { KITTY_DELETE_ALL } from "./kitty.ts";
export { IMAGE_PROTOCOLS, type ImageMode, type ImageProtocol, cellSize, parseImageMode } from "./protocol.ts";

export type DrawnImage =
  /** Text lines (half-blocks), laid out by Ink. */
  | { kind: "lines"; lines: string[]; columns: number; rows: number }
  /** A graphics escape to write at the top-left of a `columns` x `rows` box. */
  | { kind: "escape"; sequence: string; columns: number; rows: number };

/** Pixels per cell assumed when sizing sixel output (a common 8x16 cell font). */
const SIXEL_CELL = { width: 8, height: 16 };

export function drawImage(image: RGBImage, protocol: Exclude<ImageProtocol, "none">, maxColumns: number): DrawnImage {
  const { columns, rows } = cellSize(image.width, image.height, Math.min(maxColumns, protocol === "blocks" ? image.width : maxColumns));
  switch (protocol) {
    case "blocks": {
      const lines = halfBlockLines(image, columns);
      return { kind: "lines", lines, columns, rows: lines.length };
    }
    case "kitty":
      return { kind: "escape", sequence: kittyImage(encodePng(image), columns, rows), columns, rows };
    case "iterm2":
      return { kind: "escape", sequence: iterm2Image(encodePng(image), columns, rows), columns, rows };
    case "sixel": {
      const scaled = resizeNearest(image, columns * SIXEL_CELL.width, rows * SIXEL_CELL.height);
      return { kind: "escape", sequence: sixelImage(scaled), columns, rows };
    }
  }
}

const decoded = new Map<string, RGBImage | Error>();
const CACHE_LIMIT = 64;

/** The PNG at `path`, decoded once; an Error when it can't be read (shown in its place). */
export function loadImage(path: string): RGBImage | Error {
  const hit = decoded.get(path);
  if (hit) return hit;
  let result: RGBImage | Error;
  try {
    result = decodePng(readFileSync(path));
  } catch (err) {
    result = err instanceof Error ? err : new Error(String(err));
  }
  if (decoded.size >= CACHE_LIMIT) decoded.delete(decoded.keys().next().value!);
  decoded.set(path, result);
  return result;
}
