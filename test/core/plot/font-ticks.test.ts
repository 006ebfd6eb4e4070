import { describe, expect, test } from "bun:test";
import { GLYPH_HEIGHT, GLYPH_WIDTH, glyph, hasGlyph, textWidth } from "../../../src/core/plot/font.ts";
import { formatTick, niceTicks } from "../../../src/core/plot/ticks.ts";

describe("bitmap font", () => {
  test("every printable ASCII character has a 5x9 glyph, and each but the space has ink", () => {
    for (let code = 32; code <= 126; code++) {
      const char = String.fromCharCode(code);
      expect(hasGlyph(char)).toBe(true);
      const rows = glyph(char);
      expect(rows.length).toBe(GLYPH_HEIGHT);
      for (const row of rows) expect(row.length).toBe(GLYPH_WIDTH);
      expect(rows.flat().some(Boolean)).toBe(char !== " ");
    }
  });

  test("descenders sit below the baseline: g and y reach rows 7-8, capitals and digits never do", () => {
    const below = (char: string) => glyph(char).slice(7).flat().some(Boolean);
    expect(below("g")).toBe(true);
    expect(below("y")).toBe(true);
    expect(below("_")).toBe(true);
    for (const char of "ABCXYZ0123456789ace") expect(below(char)).toBe(false);
  });

  test("characters outside the font are drawn as ?", () => {
    expect(glyph("é")).toBe(glyph("?"));
  });

  test("text width: 6 pixels a character less the last gap, times the scale", () => {
    expect(textWidth("")).toBe(0);
    expect(textWidth("a")).toBe(5);
    // 3 characters: 3 * 6 - 1 = 17, at scale 2: 34.
    expect(textWidth("abc", 2)).toBe(34);
  });
});

describe("ticks", () => {
  test("nice steps of 1, 2 or 5 times a power of ten, widened to whole ticks", () => {
    // 0.95 / 5 = 0.19 -> 0.2.
    expect(niceTicks(0, 0.95, 5)).toEqual({ min: 0, max: 1, step: 0.2, values: [0, 0.2, 0.4, 0.6, 0.8, 1] });
    // 93.7..187.9: 94.2 / 5 = 18.8 -> 20; from floor(93.7 / 20) * 20 = 80 to ceil(187.9 / 20) * 20 = 200.
    expect(niceTicks(93.7, 187.9, 5).values).toEqual([80, 100, 120, 140, 160, 180, 200]);
    // Negative ranges and float noise: -0.6..0.3 by 0.2 gives -0.6, ..., 0.4 with no 0.30000000000000004.
    expect(niceTicks(-0.55, 0.31, 5).values).toEqual([-0.6, -0.4, -0.2, 0, 0.2, 0.4]);
  });

  test("steps of training: whole numbers", () => {
    // 1..12 over 6 ticks: 11 / 6 = 1.8 -> 2.
    expect(niceTicks(1, 12, 6, true).values).toEqual([0, 2, 4, 6, 8, 10, 12]);
    // A single step still gets an axis one step either side.
    expect(niceTicks(5, 5, 6, true).values).toEqual([4, 5, 6]);
  });

  test("a constant series gets an axis around its value", () => {
    expect(niceTicks(0, 0, 5).values).toEqual([-1, -0.5, 0, 0.5, 1]);
    // 24 +- 2.4 -> 21.6..26.4 by 1.
    expect(niceTicks(24, 24, 5).values).toEqual([21, 22, 23, 24, 25, 26, 27]);
  });

  test("labels: the decimals the step needs, exponents for tiny or huge axes", () => {
    expect(formatTick(0.25, 0.05)).toBe("0.25");
    expect(formatTick(0.4, 0.2)).toBe("0.4");
    expect(formatTick(200, 50)).toBe("200");
    expect(formatTick(-0.5, 0.5)).toBe("-0.5");
    expect(formatTick(0, 1e-8)).toBe("0");
    expect(formatTick(4e-8, 2e-8)).toBe("4e-8");
    expect(formatTick(1.5e-3, 5e-4)).toBe("1.5e-3");
    expect(formatTick(-6e-8, 2e-8)).toBe("-6e-8");
    expect(formatTick(2.5e6, 5e5)).toBe("2.5e6");
  });
});
