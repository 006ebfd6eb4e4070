/**
 * The pixels a plot is drawn on: an RGB image with the few primitives a line chart needs
 * (filled rectangles, anti-aliased polylines and dots, bitmap text), clipped to the image.
 * Pure TypeScript over a byte array, so it runs anywhere Bun does and a test can read any
 * pixel back.
 */
import type { RGBImage } from "../image.ts";
import { GLYPH_ADVANCE, GLYPH_HEIGHT, GLYPH_WIDTH, glyph } from "./font.ts";

/** An 8-bit colour; `#rrggbb` strings are parsed by `rgb`. */
export type Rgb = readonly [number, number, number];

export function rgb(hex: string): Rgb {
  const match = /^#([0-9a-f]{2})([0-9a-f]{2})([0-9a-f]{2})$/i.exec(hex);
  if (!match) throw new RangeError(`not a #rrggbb colour: ${hex}`);
  return [Number.parseInt(match[1]!, 16), Number.parseInt(match[2]!, 16), Number.parseInt(match[3]!, 16)];
}

export interface Rect {
  x: number;
  y: number;
  width: number;
  height: number;
}

/** A point in pixel coordinates (x right, y down). */
export interface Pixel {
  x: number;
  y: number;
}

export class Raster {
  readonly data: Uint8Array;

  constructor(
    readonly width: number,
    readonly height: number,
    background: Rgb = [255, 255, 255],
  ) {
    if (!Number.isInteger(width) || !Number.isInteger(height) || width <= 0 || height <= 0) {
      throw new RangeError(`a raster needs a positive whole size, got ${width}x${height}`);
    }
    this.data = new Uint8Array(width * height * 3);
    for (let i = 0; i < this.data.length; i += 3) this.data.set(background, i);
  }

  /** The image (shares the bytes). */
  image(): RGBImage {
    return { width: this.width, height: this.height, data: this.data };
  }

  /** The colour at (x, y), for tests. */
  pixel(x: number, y: number): Rgb {
    const i = (y * this.width + x) * 3;
    return [this.data[i]!, this.data[i + 1]!, this.data[i + 2]!];
  }

  /** Mixes `color` into pixel (x, y) with coverage `alpha` in [0, 1]; outside the image: nothing. */
  blend(x: number, y: number, color: Rgb, alpha = 1): void {
    if (x < 0 || y < 0 || x >= this.width || y >= this.height || alpha <= 0) return;
    const a = Math.min(1, alpha);
    const i = (y * this.width + x) * 3;
    for (let c = 0; c < 3; c++) this.data[i + c] = Math.round(this.data[i + c]! * (1 - a) + color[c]! * a);
  }

  fillRect(rect: Rect, color: Rgb): void {
    const x0 = Math.max(0, Math.round(rect.x));
    const y0 = Math.max(0, Math.round(rect.y));
    const x1 = Math.min(this.width, Math.round(rect.x + rect.width));
    const y1 = Math.min(this.height, Math.round(rect.y + rect.height));
    for (let y = y0; y < y1; y++) for (let x = x0; x < x1; x++) this.data.set(color, (y * this.width + x) * 3);
  }

  /** A one-pixel horizontal or vertical line (axes, ticks, grid), from (x0, y0) to (x1, y1) inclusive. */
  straightLine(x0: number, y0: number, x1: number, y1: number, color: Rgb): void {
    this.fillRect({ x: Math.min(x0, x1), y: Math.min(y0, y1), width: Math.abs(x1 - x0) + 1, height: Math.abs(y1 - y0) + 1 }, color);
  }

  /**
   * Connected line segments of `lineWidth` pixels, anti-aliased, drawn only inside
   * `clip`, solid or in dashes of `dash[0]` pixels with `dash[1]` between. Coverage is
   * accumulated per pixel first (the most of any segment), so joints are not darkened
   * where two segments overlap.
   */
  polyline(points: readonly Pixel[], color: Rgb, lineWidth: number, clip: Rect, dash?: readonly [on: number, off: number]): void {
    if (points.length === 0) return;
    const cx0 = Math.max(0, Math.floor(clip.x));
    const cy0 = Math.max(0, Math.floor(clip.y));
    const cx1 = Math.min(this.width, Math.ceil(clip.x + clip.width));
    const cy1 = Math.min(this.height, Math.ceil(clip.y + clip.height));
    const cw = cx1 - cx0;
    const ch = cy1 - cy0;
    if (cw <= 0 || ch <= 0) return;
    const coverage = new Float32Array(cw * ch);
    const half = lineWidth / 2;
    const segments = points.length === 1 ? [[points[0]!, points[0]!] as const] : points.slice(1).map((p, i) => [points[i]!, p] as const);
    // Distance along the line where each segment starts, for the dash pattern.
    let along = 0;
    for (const [a, b] of segments) {
      const start = along;
      along += Math.hypot(b.x - a.x, b.y - a.y);
      const minX = Math.max(cx0, Math.floor(Math.min(a.x, b.x) - half - 1));
      const maxX = Math.min(cx1 - 1, Math.ceil(Math.max(a.x, b.x) + half + 1));
      const minY = Math.max(cy0, Math.floor(Math.min(a.y, b.y) - half - 1));
      const maxY = Math.min(cy1 - 1, Math.ceil(Math.max(a.y, b.y) + half + 1));
      const dx = b.x - a.x;
      const dy = b.y - a.y;
      const length2 = dx * dx + dy * dy;
      for (let y = minY; y <= maxY; y++) {
        for (let x = minX; x <= maxX; x++) {
          // Distance from the pixel's centre to the segment.
          const px = x + 0.5 - a.x;
          const py = y + 0.5 - a.y;
          const t = length2 === 0 ? 0 : Math.max(0, Math.min(1, (px * dx + py * dy) / length2));
          if (dash && (start + t * Math.sqrt(length2)) % (dash[0] + dash[1]) >= dash[0]) continue;
          const distance = Math.hypot(px - t * dx, py - t * dy);
          const cover = Math.min(1, half + 0.5 - distance);
          if (cover <= 0) continue;
          const k = (y - cy0) * cw + (x - cx0);
          if (cover > coverage[k]!) coverage[k] = cover;
        }
      }
    }
    for (let y = 0; y < ch; y++) for (let x = 0; x < cw; x++) if (coverage[y * cw + x]! > 0) this.blend(cx0 + x, cy0 + y, color, coverage[y * cw + x]!);
  }

  /** A filled, anti-aliased dot of `radius` pixels centred on `at`, inside `clip`. */
  dot(at: Pixel, radius: number, color: Rgb, clip: Rect): void {
    for (let y = Math.floor(at.y - radius - 1); y <= Math.ceil(at.y + radius + 1); y++) {
      for (let x = Math.floor(at.x - radius - 1); x <= Math.ceil(at.x + radius + 1); x++) {
        if (x < clip.x || y < clip.y || x >= clip.x + clip.width || y >= clip.y + clip.height) continue;
        const cover = Math.min(1, radius + 0.5 - Math.hypot(x + 0.5 - at.x, y + 0.5 - at.y));
        if (cover > 0) this.blend(x, y, color, cover);
      }
    }
  }

  /**
   * `text` in the bitmap font with its top-left corner at (x, y), each font pixel a
   * `scale` x `scale` block. `vertical` turns it a quarter left (reading bottom to top,
   * as a y-axis label does); (x, y) is then the top-left of the turned box. `bold`
   * doubles each stroke one pixel to the right.
   */
  text(text: string, x: number, y: number, color: Rgb, options: { scale?: number; vertical?: boolean; bold?: boolean } = {}): void {
    const scale = options.scale ?? 1;
    const chars = [...text];
    const runWidth = chars.length * GLYPH_ADVANCE * scale;
    const plot = (gx: number, gy: number) => {
      // (gx, gy): a pixel of the unturned text box; turned, it lands at (gy, runWidth - 1 - gx).
      if (options.vertical) this.blend(Math.round(x) + gy, Math.round(y) + runWidth - 1 - gx, color);
      else this.blend(Math.round(x) + gx, Math.round(y) + gy, color);
    };
    chars.forEach((char, i) => {
      const rows = glyph(char);
      for (let row = 0; row < GLYPH_HEIGHT; row++) {
        for (let col = 0; col < GLYPH_WIDTH; col++) {
          if (!rows[row]![col]) continue;
          for (let sy = 0; sy < scale; sy++) {
            for (let sx = 0; sx < scale + (options.bold ? 1 : 0); sx++) plot((i * GLYPH_ADVANCE + col) * scale + sx, row * scale + sy);
          }
        }
      }
    });
  }
}
