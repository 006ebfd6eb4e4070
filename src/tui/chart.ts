/**
 * Line charts drawn with Braille characters: each character cell holds a 2x4 grid of
 * dots, so a chart of `width` x `height` cells has `2*width` x `4*height` dots. The series
 * is stretched or sampled to the dot columns (linear interpolation between points) and
 * scaled between its min and max; steep segments are filled vertically so the line stays
 * connected.
 */

/** Dot bit of Braille cell position (column 0..1, row 0..3), per the Unicode layout. */
const DOT_BITS = [
  [0x01, 0x02, 0x04, 0x40],
  [0x08, 0x10, 0x20, 0x80],
] as const;
const BRAILLE_BLANK = 0x2800;

export interface ChartScale {
  min: number;
  max: number;
}

/** The finite min and max of `values`, or undefined when there is none. */
export function seriesRange(values: readonly number[]): ChartScale | undefined {
  let min = Infinity;
  let max = -Infinity;
  for (const v of values) {
    if (!Number.isFinite(v)) continue;
    if (v < min) min = v;
    if (v > max) max = v;
  }
  return min === Infinity ? undefined : { min, max };
}

/** The series' value at fractional index `t` (linear between neighbours; gaps stay gaps). */
function sampleAt(values: readonly number[], t: number): number {
  const lo = Math.floor(t);
  const hi = Math.min(values.length - 1, lo + 1);
  const frac = t - lo;
  const a = values[lo]!;
  const b = values[hi]!;
  if (!Number.isFinite(a)) return a;
  if (!Number.isFinite(b) || frac === 0) return a;
  return a + (b - a) * frac;
}

/**
 * `height` strings of `width` Braille characters. An empty (or all non-finite) series
 * gives blank lines; a constant series is drawn along the middle row.
 */
export function brailleChart(values: readonly number[], width: number, height: number, scale = seriesRange(values)): string[] {
  const cols = Math.max(1, Math.floor(width));
  const rows = Math.max(1, Math.floor(height));
  const bits = Array.from({ length: rows }, () => new Array<number>(cols).fill(0));
  const dotsX = cols * 2;
  const dotsY = rows * 4;
  if (values.length > 0 && scale) {
    const span = scale.max - scale.min;
    const dotRow = (v: number) => (span === 0 ? Math.floor((dotsY - 1) / 2) : Math.round(((scale.max - v) / span) * (dotsY - 1)));
    const setDot = (x: number, y: number) => {
      const row = Math.max(0, Math.min(dotsY - 1, y));
      bits[Math.floor(row / 4)]![Math.floor(x / 2)]! |= DOT_BITS[x % 2]![row % 4]!;
    };
    let previous: number | undefined;
    for (let x = 0; x < dotsX; x++) {
      const t = values.length === 1 ? 0 : (x * (values.length - 1)) / (dotsX - 1);
      const v = sampleAt(values, t);
      if (!Number.isFinite(v)) {
        previous = undefined;
        continue;
      }
      const y = dotRow(v);
      const from = previous ?? y;
      for (let yy = Math.min(from, y); yy <= Math.max(from, y); yy++) setDot(x, yy);
      previous = y;
    }
  }
  return bits.map((line) => line.map((b) => String.fromCharCode(BRAILLE_BLANK + b)).join(""));
}

/**
 * One-row summary of a whole series with eight bar heights, for tight spaces: a series
 * longer than `width` is cut into `width` consecutive buckets, each drawn at the mean of
 * its finite values (a bucket with none is a blank), so the row always spans every value,
 * the same span as the series' min and max.
 */
export function sparkline(values: readonly number[], width: number): string {
  const bars = "▁▂▃▄▅▆▇█";
  const cells = Math.max(1, Math.floor(width));
  const buckets = values.length <= cells ? values.map((v) => [v]) : Array.from({ length: cells }, (_, i) => values.slice(Math.floor((i * values.length) / cells), Math.floor(((i + 1) * values.length) / cells)));
  const means = buckets.map((bucket) => {
    const finite = bucket.filter(Number.isFinite);
    return finite.length === 0 ? Number.NaN : finite.reduce((a, b) => a + b, 0) / finite.length;
  });
  const scale = seriesRange(means);
  if (!scale) return "";
  const span = scale.max - scale.min;
  return means.map((v) => (Number.isFinite(v) ? bars[span === 0 ? 3 : Math.round(((v - scale.min) / span) * (bars.length - 1))] : " ")).join("");
}
