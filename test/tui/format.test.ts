import { describe, expect, test } from "bun:test";
import { estimateRemaining, formatDuration, formatPercent, formatValue, progressBar, truncate } from "../../src/tui/format.ts";

describe("format", () => {
  test("progress bar fills done/total of the width", () => {
    expect(progressBar(3, 10, 10)).toBe("███░░░░░░░");
    expect(progressBar(10, 10, 4)).toBe("████");
    expect(progressBar(0, 10, 4)).toBe("░░░░");
    // Unknown total: an empty bar, never NaN cells.
    expect(progressBar(5, undefined, 4)).toBe("░░░░");
    // Overshoot is clamped.
    expect(progressBar(12, 10, 4)).toBe("████");
  });

  test("durations", () => {
    expect(formatDuration(42)).toBe("42s");
    expect(formatDuration(185)).toBe("3m05s");
    expect(formatDuration(3720)).toBe("1h02m");
    expect(formatDuration(Number.NaN)).toBe("-");
  });

  test("remaining time at the mean pace: 4 of 10 done in 20 s leaves 6 x 5 s", () => {
    expect(estimateRemaining(4, 10, 20)).toBe(30);
    expect(estimateRemaining(0, 10, 20)).toBeUndefined();
    expect(estimateRemaining(10, 10, 20)).toBe(0);
  });

  test("metric values stay short", () => {
    expect(formatValue(0.123456)).toBe("0.1235");
    expect(formatValue(-12.3456)).toBe("-12.35");
    expect(formatValue(1234.5)).toBe("1234.5");
    expect(formatValue(123456)).toBe("1.2e+5");
    expect(formatValue(0.00003)).toBe("3.0e-5");
    expect(formatValue(0)).toBe("0");
    expect(formatValue(undefined)).toBe("-");
    expect(formatValue(Number.POSITIVE_INFINITY)).toBe("inf");
    expect(formatPercent(0.25)).toBe("25.0%");
    expect(truncate("abcdef", 4)).toBe("abc…");
    expect(truncate("abc", 4)).toBe("abc");
  });
});
