/**
 * Small raster helpers for drawing tile art into RGB images. Everything works on
 * `RGBImage` (row-major, 3 bytes per pixel). Tiles are drawn once and then copied row by
 * row, which keeps per-step rendering to a handful of `Uint8Array.set` calls.
 */
import type { RGBImage } from "../../src/core/image.ts";

export type Rgb = readonly [number, number, number];

export function createImage(width: number, height: number, fill: Rgb = [0, 0, 0]): RGBImage {
  const data = new Uint8Array(width * height * 3);
  if (fill[0] !== 0 || fill[1] !== 0 || fill[2] !== 0) {
    for (let i = 0; i < data.length; i += 3) {
      data[i] = fill[0];
      data[i + 1] = fill[1];
      data[i + 2] = fill[2];
    }
  }
  return { width, height, data };
}

export function cloneImage(img: RGBImage): RGBImage {
  return { width: img.width, height: img.height, data: img.data.slice() };
}

export function getPixel(img: RGBImage, x: number, y: number): [number, number, number] {
  const i = (y * img.width + x) * 3;
  return [img.data[i]!, img.data[i + 1]!, img.data[i + 2]!];
}

export function setPixel(img: RGBImage, x: number, y: number, c: Rgb): void {
  if (x < 0 || y < 0 || x >= img.width || y >= img.height) return;
  const i = (y * img.width + x) * 3;
  img.data[i] = c[0];
  img.data[i + 1] = c[1];
  img.data[i + 2] = c[2];
}

/** Fills the rectangle [x, x+w) x [y, y+h), clipped to the image. */
export function fillRect(img: RGBImage, x: number, y: number, w: number, h: number, c: Rgb): void {
  const x0 = Math.max(0, Math.floor(x));
  const y0 = Math.max(0, Math.floor(y));
  const x1 = Math.min(img.width, Math.floor(x + w));
  const y1 = Math.min(img.height, Math.floor(y + h));
  for (let yy = y0; yy < y1; yy++) for (let xx = x0; xx < x1; xx++) setPixel(img, xx, yy, c);
}

/** Fills every pixel whose centre lies inside the ellipse centred at (cx, cy). */
export function fillEllipse(img: RGBImage, cx: number, cy: number, rx: number, ry: number, c: Rgb): void {
  for (let y = Math.floor(cy - ry); y <= Math.ceil(cy + ry); y++) {
    for (let x = Math.floor(cx - rx); x <= Math.ceil(cx + rx); x++) {
      const dx = (x + 0.5 - cx) / rx;
      const dy = (y + 0.5 - cy) / ry;
      if (dx * dx + dy * dy <= 1) setPixel(img, x, y, c);
    }
  }
}

/** Draws a 1-pixel line from (x0, y0) to (x1, y1) (Bresenham). */
export function drawLine(img: RGBImage, x0: number, y0: number, x1: number, y1: number, c: Rgb, thickness = 1): void {
  let x = Math.round(x0);
  let y = Math.round(y0);
  const xe = Math.round(x1);
  const ye = Math.round(y1);
  const dx = Math.abs(xe - x);
  const dy = -Math.abs(ye - y);
  const sx = x < xe ? 1 : -1;
  const sy = y < ye ? 1 : -1;
  let err = dx + dy;
  for (;;) {
    fillRect(img, x - Math.floor((thickness - 1) / 2), y - Math.floor((thickness - 1) / 2), thickness, thickness, c);
    if (x === xe && y === ye) break;
    const e2 = 2 * err;
    if (e2 >= dy) {
      err += dy;
      x += sx;
    }
    if (e2 <= dx) {
      err += dx;
      y += sy;
    }
  }
}

/** Copies `src` into `dst` with its top-left corner at (x, y); `src` must fit. */
export function blit(dst: RGBImage, src: RGBImage, x: number, y: number): void {
  const rowBytes = src.width * 3;
  for (let row = 0; row < src.height; row++) {
    const from = row * rowBytes;
    dst.data.set(src.data.subarray(from, from + rowBytes), ((y + row) * dst.width + x) * 3);
  }
}

/** Nearest-neighbour resize. */
export function resizeNearest(src: RGBImage, width: number, height: number): RGBImage {
  const out = createImage(width, height);
  for (let y = 0; y < height; y++) {
    const sy = Math.min(src.height - 1, Math.floor(((y + 0.5) * src.height) / height));
    for (let x = 0; x < width; x++) {
      const sx = Math.min(src.width - 1, Math.floor(((x + 0.5) * src.width) / width));
      const si = (sy * src.width + sx) * 3;
      const di = (y * width + x) * 3;
      out.data[di] = src.data[si]!;
      out.data[di + 1] = src.data[si + 1]!;
      out.data[di + 2] = src.data[si + 2]!;
    }
  }
  return out;
}
