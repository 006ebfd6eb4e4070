import { describe, expect, test } from "bun:test";
import { glyph } from "../../../src/core/plot/font.ts";
import { Raster, rgb } from "../../../src/core/plot/raster.ts";

const WHITE = [255, 255, 255];
const RED = rgb("#ff0000");

describe("raster", () => {
  test("colours parse from #rrggbb and nothing else", () => {
    expect(rgb("#1f77b4")).toEqual([0x1f, 0x77, 0xb4]);
    expect(() => rgb("blue")).toThrow("not a #rrggbb colour");
  });

  test("fillRect is clipped to the image; blend mixes by coverage", () => {
    const r = new Raster(4, 3);
    r.fillRect({ x: 2, y: 1, width: 10, height: 10 }, RED);
    expect([...r.pixel(1, 1)]).toEqual(WHITE);
    expect([...r.pixel(3, 2)]).toEqual([255, 0, 0]);
    // Half red over white: 255 * 0.5 + 0 * 0.5 = 127.5 -> 128 for green and blue.
    r.blend(0, 0, RED, 0.5);
    expect([...r.pixel(0, 0)]).toEqual([255, 128, 128]);
  });

  test("a horizontal polyline 2 pixels wide covers the two rows it straddles and nothing far off", () => {
    const r = new Raster(20, 10);
    // Along y = 5 (the boundary between rows 4 and 5): pixel centres at 4.5 and 5.5 are 0.5 away -> full cover.
    r.polyline([{ x: 2, y: 5 }, { x: 10, y: 5 }, { x: 18, y: 5 }], RED, 2, { x: 0, y: 0, width: 20, height: 10 });
    expect([...r.pixel(10, 4)]).toEqual([255, 0, 0]);
    expect([...r.pixel(10, 5)]).toEqual([255, 0, 0]);
    expect([...r.pixel(10, 2)]).toEqual(WHITE);
    expect([...r.pixel(10, 7)]).toEqual(WHITE);
    // The joint at x = 10 is drawn like the rest of the line, not twice (no darker spot).
    expect([...r.pixel(9, 4)]).toEqual([...r.pixel(11, 4)]);
  });

  test("a dashed polyline: 7 pixels drawn, 5 left out, measured along the line across its joints", () => {
    const r = new Raster(40, 10);
    // A joint at x = 14, inside the second dash (12-19): the dash runs on across it.
    r.polyline([{ x: 0, y: 5 }, { x: 14, y: 5 }, { x: 40, y: 5 }], RED, 2, { x: 0, y: 0, width: 40, height: 10 }, [7, 5]);
    const drawn = Array.from({ length: 40 }, (_, x) => (r.pixel(x, 5)[1] === 0 ? "#" : "."));
    // Pixel x's centre is at x + 0.5: on for 0-6, off for 7-11, on for 12-18, off 19-23, ...
    expect(drawn.join("")).toBe("#######.....#######.....#######.....####");
  });

  test("a polyline stops at its clip rectangle", () => {
    const r = new Raster(20, 10);
    r.polyline([{ x: 0, y: 5 }, { x: 20, y: 5 }], RED, 2, { x: 5, y: 0, width: 5, height: 10 });
    expect([...r.pixel(4, 5)]).toEqual(WHITE);
    expect([...r.pixel(7, 5)]).toEqual([255, 0, 0]);
    expect([...r.pixel(10, 5)]).toEqual(WHITE);
  });

  test("text: the glyph's pixels at the given corner and scale; turned text reads bottom to top", () => {
    const r = new Raster(30, 30);
    r.text("L", 1, 2, RED, { scale: 2 });
    // L is a column of ink on the left and a bar along row 6.
    const rows = glyph("L");
    for (let row = 0; row < 9; row++) {
      for (let col = 0; col < 5; col++) {
        expect([...r.pixel(1 + col * 2, 2 + row * 2)]).toEqual(rows[row]![col] ? [255, 0, 0] : WHITE);
        expect([...r.pixel(1 + col * 2 + 1, 2 + row * 2 + 1)]).toEqual(rows[row]![col] ? [255, 0, 0] : WHITE);
      }
    }
    const turned = new Raster(12, 12);
    turned.text("L", 0, 0, RED, { vertical: true });
    // Turned a quarter left: the L's column (x = 0 of the glyph) becomes the bottom row of the 6-pixel-long box.
    for (let row = 0; row < 7; row++) expect([...turned.pixel(row, 5)]).toEqual([255, 0, 0]);
    // Its foot (row 6, columns 0-4) becomes the column x = 6, from y = 5 up to y = 1.
    for (let col = 0; col < 5; col++) expect([...turned.pixel(6, 5 - col)]).toEqual([255, 0, 0]);
    expect([...turned.pixel(6, 0)]).toEqual(WHITE);
  });

  test("a raster needs a positive whole size", () => {
    expect(() => new Raster(0, 10)).toThrow("positive whole size");
  });
});
