import { describe, expect, test } from "bun:test";
import { brailleChart, seriesRange, sparkline } from "../../src/tui/chart.ts";

// Braille cell dots: left column rows 0-3 = 0x01 0x02 0x04 0x40, right column = 0x08 0x10 0x20 0x80.
const cell = (bits: number) => String.fromCharCode(0x2800 + bits);

describe("braille chart", () => {
  test("a rising pair in one cell: bottom-left dot, then the right column filled up to the top", () => {
    // 1x1 cell = 2x4 dots. x=0: value 0 -> bottom row 3 (0x40). x=1: value 1 -> row 0, and the
    // rows between the previous dot and this one are filled: 0x08|0x10|0x20|0x80.
    expect(brailleChart([0, 1], 1, 1)).toEqual([cell(0x40 | 0x08 | 0x10 | 0x20 | 0x80)]);
  });

  test("a falling pair mirrors it", () => {
    // x=0: value 1 -> row 0 (0x01); x=1: value 0 -> row 3, filled from row 0: 0xb8.
    expect(brailleChart([1, 0], 1, 1)).toEqual([cell(0x01 | 0xb8)]);
  });

  test("a constant series runs along the middle row", () => {
    // 4 dot rows, middle = floor(3/2) = 1: bits 0x02 (left) and 0x10 (right) in every cell.
    expect(brailleChart([5, 5, 5], 2, 1)).toEqual([cell(0x12) + cell(0x12)]);
  });

  test("two rows: a rise from the bottom of row 2 to the top of row 1", () => {
    // 1 x 2 cells = 2 x 8 dots: x=0 -> dot row 7 (cell row 1, 0x40); x=1 -> dot row 0 with the
    // column filled from 7 up to 0: the right column of both cells (0xb8 each).
    expect(brailleChart([0, 1], 1, 2)).toEqual([cell(0xb8), cell(0x40 | 0xb8)]);
  });

  test("empty and non-finite series draw blank cells", () => {
    expect(brailleChart([], 3, 1)).toEqual([cell(0).repeat(3)]);
    expect(brailleChart([Number.NaN], 2, 1)).toEqual([cell(0).repeat(2)]);
    expect(seriesRange([Number.NaN, 2, -1, Number.POSITIVE_INFINITY])).toEqual({ min: -1, max: 2 });
  });

  test("every line has exactly `width` characters, whatever the series length", () => {
    const long = Array.from({ length: 1000 }, (_, i) => Math.sin(i / 50));
    for (const line of brailleChart(long, 17, 3)) expect([...line].length).toBe(17);
  });

  test("sparkline: eight levels between min and max", () => {
    // 0 -> level 0, 1 -> round(0.5 * 7) = 4, 2 -> 7.
    expect(sparkline([0, 1, 2], 3)).toBe("▁▅█");
  });

  test("sparkline: a longer series is averaged into buckets, so the row spans all of it", () => {
    // 4 values in 3 cells: [9], [0], [1, 2] -> 9, 0, 1.5; scaled over 0..9: 7, 0, round(1.5 / 9 * 7) = 1.
    expect(sparkline([9, 0, 1, 2], 3)).toBe("█▁▂");
    // 6 values in 2 cells: means 2 and 5; the first value still counts.
    expect(sparkline([1, 2, 3, 4, 5, 6], 2)).toBe("▁█");
    // A bucket with no finite value is a blank; NaN elsewhere is left out of its bucket's mean.
    expect(sparkline([0, Number.NaN, Number.NaN, Number.NaN, 4, Number.NaN], 3)).toBe("▁ █");
  });
});
