/**
 * FrozenLake rendering (spec 3.4): the text grid, and an RGB image laid out like
 * gymnasium's `rgb_array` (window min(64 * cols, 512) x min(64 * rows, 512), so 4x4 gives
 * 256x256 with 64 px cells) with ice, holes, a gift for the goal, a stool at the start and
 * an elf facing the last action, all drawn by our own code.
 */
import { createImage, drawLine, fillEllipse, fillRect, type Rgb } from "../_common/image.ts";
import { TileRenderer } from "../_common/tile-renderer.ts";
import type { RGBImage } from "../../src/core/image.ts";
import type { FrozenLakeAction } from "./map.ts";

export interface FrozenLakeView {
  desc: readonly string[];
  row: number;
  col: number;
  /** The last action taken (the elf faces it); null after reset (faces down). */
  lastAction: FrozenLakeAction | null;
}

const TEXT_TOKENS = { player: " P ", frozen: " _ ", hole: " O ", goal: " G ", playerInHole: " X ", playerOnGoal: " V " };

export function renderText(view: FrozenLakeView): string {
  return view.desc
    .map((line, r) =>
      [...line]
        .map((tile, c) => {
          if (r === view.row && c === view.col) {
            return tile === "H" ? TEXT_TOKENS.playerInHole : tile === "G" ? TEXT_TOKENS.playerOnGoal : TEXT_TOKENS.player;
          }
          return tile === "H" ? TEXT_TOKENS.hole : tile === "G" ? TEXT_TOKENS.goal : TEXT_TOKENS.frozen;
        })
        .join(""),
    )
    .join("\n");
}

export const FL_PALETTE = {
  ice: [204, 230, 246] as Rgb,
  iceShine: [236, 246, 253] as Rgb,
  cellBorder: [180, 200, 230] as Rgb,
  water: [28, 66, 140] as Rgb,
  waterRim: [112, 152, 200] as Rgb,
  crack: [20, 30, 60] as Rgb,
  gift: [214, 40, 52] as Rgb,
  ribbon: [252, 210, 58] as Rgb,
  stool: [136, 88, 46] as Rgb,
  skin: [250, 214, 170] as Rgb,
  tunic: [36, 150, 72] as Rgb,
  hat: [200, 30, 40] as Rgb,
  eye: [20, 20, 20] as Rgb,
};

export function windowSize(rows: number, cols: number): { width: number; height: number; cellWidth: number; cellHeight: number } {
  const width = Math.min(64 * cols, 512);
  const height = Math.min(64 * rows, 512);
  return { width, height, cellWidth: Math.floor(width / cols), cellHeight: Math.floor(height / rows) };
}

const BASES = ["F", "H", "G", "S"] as const;
const OVERLAYS = ["none", "left", "down", "right", "up", "cracked"] as const;
type Overlay = (typeof OVERLAYS)[number];

function tileCode(tile: string, overlay: Overlay): number {
  const base = Math.max(0, BASES.indexOf((tile === "F" || tile === "H" || tile === "G" || tile === "S" ? tile : "F") as (typeof BASES)[number]));
  return base * OVERLAYS.length + OVERLAYS.indexOf(overlay);
}

function drawTile(code: number, w: number, h: number): RGBImage {
  const base = BASES[Math.floor(code / OVERLAYS.length)]!;
  const overlay = OVERLAYS[code % OVERLAYS.length]!;
  const t = createImage(w, h, FL_PALETTE.ice);
  // A little shine on the ice, then the cell outline gymnasium draws.
  drawLine(t, w * 0.15, h * 0.3, w * 0.35, h * 0.1, FL_PALETTE.iceShine, Math.max(1, Math.round(w / 32)));
  drawLine(t, w * 0.65, h * 0.9, w * 0.85, h * 0.7, FL_PALETTE.iceShine, Math.max(1, Math.round(w / 32)));
  if (base === "H") {
    fillEllipse(t, w / 2, h / 2, w * 0.42, h * 0.36, FL_PALETTE.waterRim);
    fillEllipse(t, w / 2, h / 2, w * 0.36, h * 0.3, FL_PALETTE.water);
    if (overlay === "cracked") {
      const s = Math.max(1, Math.round(w / 32));
      drawLine(t, w * 0.3, h * 0.35, w * 0.5, h * 0.5, FL_PALETTE.crack, s);
      drawLine(t, w * 0.5, h * 0.5, w * 0.72, h * 0.4, FL_PALETTE.crack, s);
      drawLine(t, w * 0.5, h * 0.5, w * 0.45, h * 0.72, FL_PALETTE.crack, s);
      fillEllipse(t, w / 2, h * 0.22, w * 0.1, h * 0.08, FL_PALETTE.hat); // the elf's hat, floating
    }
  } else if (base === "G") {
    fillRect(t, w * 0.22, h * 0.35, w * 0.56, h * 0.5, FL_PALETTE.gift);
    fillRect(t, w * 0.18, h * 0.27, w * 0.64, h * 0.12, FL_PALETTE.gift);
    fillRect(t, w * 0.45, h * 0.27, w * 0.1, h * 0.58, FL_PALETTE.ribbon);
    fillEllipse(t, w * 0.4, h * 0.22, w * 0.08, h * 0.06, FL_PALETTE.ribbon);
    fillEllipse(t, w * 0.6, h * 0.22, w * 0.08, h * 0.06, FL_PALETTE.ribbon);
  } else if (base === "S") {
    fillRect(t, w * 0.25, h * 0.62, w * 0.5, h * 0.1, FL_PALETTE.stool);
    fillRect(t, w * 0.3, h * 0.72, w * 0.08, h * 0.18, FL_PALETTE.stool);
    fillRect(t, w * 0.62, h * 0.72, w * 0.08, h * 0.18, FL_PALETTE.stool);
  }
  if (overlay !== "none" && overlay !== "cracked") drawElf(t, w, h, overlay);
  drawLine(t, 0, 0, w - 1, 0, FL_PALETTE.cellBorder);
  drawLine(t, 0, 0, 0, h - 1, FL_PALETTE.cellBorder);
  drawLine(t, w - 1, 0, w - 1, h - 1, FL_PALETTE.cellBorder);
  drawLine(t, 0, h - 1, w - 1, h - 1, FL_PALETTE.cellBorder);
  return t;
}

function drawElf(t: RGBImage, w: number, h: number, facing: "left" | "down" | "right" | "up"): void {
  fillRect(t, w * 0.34, h * 0.45, w * 0.32, h * 0.35, FL_PALETTE.tunic); // body
  fillRect(t, w * 0.36, h * 0.8, w * 0.1, h * 0.12, FL_PALETTE.tunic); // legs
  fillRect(t, w * 0.54, h * 0.8, w * 0.1, h * 0.12, FL_PALETTE.tunic);
  fillEllipse(t, w / 2, h * 0.34, w * 0.16, h * 0.14, FL_PALETTE.skin); // head
  fillRect(t, w * 0.34, h * 0.14, w * 0.32, h * 0.1, FL_PALETTE.hat); // hat
  fillRect(t, w * 0.44, h * 0.06, w * 0.12, h * 0.08, FL_PALETTE.hat);
  const eye = (x: number, y: number) => fillRect(t, x - w * 0.025, y - h * 0.025, Math.max(1, w * 0.05), Math.max(1, h * 0.05), FL_PALETTE.eye);
  if (facing === "down") {
    eye(w * 0.44, h * 0.36);
    eye(w * 0.56, h * 0.36);
  } else if (facing === "left") {
    eye(w * 0.4, h * 0.36);
  } else if (facing === "right") {
    eye(w * 0.6, h * 0.36);
  }
  // facing up: the back of the head, no eyes
}

export class FrozenLakeImageRenderer {
  private renderer: TileRenderer | null = null;
  private key = "";

  render(view: FrozenLakeView): RGBImage {
    const rows = view.desc.length;
    const cols = view.desc[0]!.length;
    const size = windowSize(rows, cols);
    const key = `${rows}x${cols}`;
    if (!this.renderer || key !== this.key) {
      this.renderer = new TileRenderer({
        rows,
        cols,
        cellWidth: size.cellWidth,
        cellHeight: size.cellHeight,
        width: size.width,
        height: size.height,
        drawTile: (code) => drawTile(code, size.cellWidth, size.cellHeight),
      });
      this.key = key;
    }
    const codes = new Int32Array(rows * cols);
    for (let r = 0; r < rows; r++) {
      for (let c = 0; c < cols; c++) {
        const tile = view.desc[r]![c]!;
        let overlay: Overlay = "none";
        if (r === view.row && c === view.col) overlay = tile === "H" ? "cracked" : (view.lastAction ?? "down");
        codes[r * cols + c] = tileCode(tile, overlay);
      }
    }
    return this.renderer.render(codes);
  }
}
