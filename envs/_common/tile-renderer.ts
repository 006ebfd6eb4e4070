/**
 * Renders a grid of cell codes into an RGB image from pre-drawn tiles.
 *
 * Tiles are drawn once per code (and cached); each render only re-blits the cells whose
 * code changed since the previous render, then hands out a copy so callers may keep the
 * image while the env moves on.
 */
import { blit, cloneImage, createImage, type Rgb } from "./image.ts";
import type { RGBImage } from "../../src/core/image.ts";

export interface TileRendererOptions {
  rows: number;
  cols: number;
  cellWidth: number;
  cellHeight: number;
  /** Canvas size; defaults to exactly rows x cols cells. */
  width?: number;
  height?: number;
  background?: Rgb;
  /** Draws the tile for a cell code; called once per distinct code. */
  drawTile: (code: number) => RGBImage;
}

export class TileRenderer {
  readonly width: number;
  readonly height: number;
  private readonly canvas: RGBImage;
  private readonly drawn: Int32Array;
  private readonly tiles = new Map<number, RGBImage>();

  constructor(private readonly options: TileRendererOptions) {
    this.width = options.width ?? options.cols * options.cellWidth;
    this.height = options.height ?? options.rows * options.cellHeight;
    this.canvas = createImage(this.width, this.height, options.background);
    this.drawn = new Int32Array(options.rows * options.cols).fill(-1);
  }

  render(codes: ArrayLike<number>): RGBImage {
    const { rows, cols, cellWidth, cellHeight } = this.options;
    if (codes.length !== rows * cols) throw new RangeError(`TileRenderer: expected ${rows * cols} codes, got ${codes.length}`);
    for (let i = 0; i < codes.length; i++) {
      const code = codes[i]!;
      if (this.drawn[i] === code) continue;
      blit(this.canvas, this.tile(code), (i % cols) * cellWidth, Math.floor(i / cols) * cellHeight);
      this.drawn[i] = code;
    }
    return cloneImage(this.canvas);
  }

  private tile(code: number): RGBImage {
    let tile = this.tiles.get(code);
    if (!tile) {
      tile = this.options.drawTile(code);
      if (tile.width !== this.options.cellWidth || tile.height !== this.options.cellHeight) {
        throw new RangeError(`TileRenderer: tile for code ${code} is ${tile.width}x${tile.height}, expected ${this.options.cellWidth}x${this.options.cellHeight}`);
      }
      this.tiles.set(code, tile);
    }
    return tile;
  }
}
