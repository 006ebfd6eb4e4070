/**
 * Sokoban rendering (spec 2.7): a text grid of 3-character tokens, and an RGB image of
 * 16 px tiles drawn by our own code (a 6x6 room gives 96x96 px).
 */
import { createImage, drawLine, fillEllipse, fillRect, type Rgb } from "../_common/image.ts";
import { TileRenderer } from "../_common/tile-renderer.ts";
import type { RGBImage } from "../../src/core/image.ts";
import { CELL, type SokobanRoom } from "./room.ts";

export const TILE_SIZE = 16;

const TEXT_TOKENS: Record<number, string> = {
  [CELL.wall]: " # ",
  [CELL.floor]: " _ ",
  [CELL.target]: " O ",
  [CELL.boxOnTarget]: " √ ",
  [CELL.box]: " X ",
  [CELL.player]: " P ",
  [CELL.playerOnTarget]: " S ",
};

/** Cell codes as drawn: the player on a target becomes `playerOnTarget` (6). */
export function displayCodes(room: SokobanRoom): Uint8Array {
  const codes = room.state.slice();
  for (let i = 0; i < codes.length; i++) {
    if (codes[i] === CELL.player && room.fixed[i] === CELL.target) codes[i] = CELL.playerOnTarget;
  }
  return codes;
}

export function renderText(room: SokobanRoom): string {
  const codes = displayCodes(room);
  const rows: string[] = [];
  for (let r = 0; r < room.height; r++) {
    let row = "";
    for (let c = 0; c < room.width; c++) row += TEXT_TOKENS[codes[r * room.width + c]!] ?? " ? ";
    rows.push(row);
  }
  return rows.join("\n");
}

/** Colours of the tile art; exported for pixel spot checks in tests. */
export const PALETTE = {
  floor: [38, 38, 44] as Rgb,
  floorEdge: [50, 50, 58] as Rgb,
  brick: [176, 82, 56] as Rgb,
  mortar: [92, 44, 32] as Rgb,
  target: [232, 62, 62] as Rgb,
  crate: [196, 146, 66] as Rgb,
  crateEdge: [112, 72, 30] as Rgb,
  crateOnTarget: [96, 186, 84] as Rgb,
  crateOnTargetEdge: [40, 104, 40] as Rgb,
  skin: [250, 214, 170] as Rgb,
  shirt: [58, 118, 226] as Rgb,
  legs: [30, 40, 90] as Rgb,
};

function floorTile(): RGBImage {
  const t = createImage(TILE_SIZE, TILE_SIZE, PALETTE.floor);
  fillRect(t, 0, 0, TILE_SIZE, 1, PALETTE.floorEdge);
  fillRect(t, 0, 0, 1, TILE_SIZE, PALETTE.floorEdge);
  return t;
}

function wallTile(): RGBImage {
  const t = createImage(TILE_SIZE, TILE_SIZE, PALETTE.mortar);
  // Four courses of bricks, 3 px high with 1 px mortar, alternate courses offset by half.
  for (let course = 0; course < 4; course++) {
    const y = course * 4;
    const offset = course % 2 === 0 ? 0 : -4;
    for (let x = offset; x < TILE_SIZE; x += 8) fillRect(t, x, y, 7, 3, PALETTE.brick);
  }
  return t;
}

function drawTargetMark(t: RGBImage): void {
  const lo = 3;
  const hi = TILE_SIZE - 4;
  drawLine(t, lo, lo, hi, lo, PALETTE.target);
  drawLine(t, lo, hi, hi, hi, PALETTE.target);
  drawLine(t, lo, lo, lo, hi, PALETTE.target);
  drawLine(t, hi, lo, hi, hi, PALETTE.target);
}

function crateTile(onTarget: boolean): RGBImage {
  const t = floorTile();
  const fill = onTarget ? PALETTE.crateOnTarget : PALETTE.crate;
  const edge = onTarget ? PALETTE.crateOnTargetEdge : PALETTE.crateEdge;
  fillRect(t, 1, 1, TILE_SIZE - 2, TILE_SIZE - 2, edge);
  fillRect(t, 2, 2, TILE_SIZE - 4, TILE_SIZE - 4, fill);
  drawLine(t, 3, 3, TILE_SIZE - 4, TILE_SIZE - 4, edge);
  drawLine(t, TILE_SIZE - 4, 3, 3, TILE_SIZE - 4, edge);
  return t;
}

function drawPlayer(t: RGBImage): void {
  fillEllipse(t, 8, 4.5, 3, 3, PALETTE.skin); // head
  fillRect(t, 5, 8, 6, 4, PALETTE.shirt); // body
  fillRect(t, 3, 8, 2, 3, PALETTE.skin); // arms
  fillRect(t, 11, 8, 2, 3, PALETTE.skin);
  fillRect(t, 5, 12, 2, 3, PALETTE.legs); // legs
  fillRect(t, 9, 12, 2, 3, PALETTE.legs);
}

export function drawSokobanTile(code: number): RGBImage {
  switch (code) {
    case CELL.wall:
      return wallTile();
    case CELL.floor:
      return floorTile();
    case CELL.target: {
      const t = floorTile();
      drawTargetMark(t);
      return t;
    }
    case CELL.boxOnTarget:
      return crateTile(true);
    case CELL.box:
      return crateTile(false);
    case CELL.player: {
      const t = floorTile();
      drawPlayer(t);
      return t;
    }
    case CELL.playerOnTarget: {
      const t = floorTile();
      drawTargetMark(t);
      drawPlayer(t);
      return t;
    }
    default:
      throw new RangeError(`no Sokoban tile for cell code ${code}`);
  }
}

/** Keeps a canvas per room size and re-draws only the cells that changed. */
export class SokobanImageRenderer {
  private renderer: TileRenderer | null = null;
  private size = "";

  render(room: SokobanRoom): RGBImage {
    const size = `${room.height}x${room.width}`;
    if (!this.renderer || size !== this.size) {
      this.renderer = new TileRenderer({ rows: room.height, cols: room.width, cellWidth: TILE_SIZE, cellHeight: TILE_SIZE, drawTile: drawSokobanTile });
      this.size = size;
    }
    return this.renderer.render(displayCodes(room));
  }
}
