/**
 * Axis ticks at "nice" numbers (1, 2 or 5 times a power of ten) and their labels, so an
 * axis reads 0, 0.2, 0.4 rather than 0.0137, 0.2151. Pure arithmetic.
 */

export interface Ticks {
  /** The axis spans [min, max]: the data's range widened to whole ticks. */
  min: number;
  max: number;
  step: number;
  values: number[];
}

/** The nice number (1, 2, 5 x 10^k) closest above `rough`. */
function niceStep(rough: number): number {
  const power = 10 ** Math.floor(Math.log10(rough));
  const fraction = rough / power;
  const nice = fraction <= 1 ? 1 : fraction <= 2 ? 2 : fraction <= 5 ? 5 : 10;
  return nice * power;
}

/**
 * About `count` ticks covering [lo, hi]. An empty range (lo == hi) is widened around the
 * value first, so a constant series still gets an axis; `integer` keeps the step a
 * whole number (training steps).
 */
export function niceTicks(lo: number, hi: number, count = 5, integer = false): Ticks {
  if (!Number.isFinite(lo) || !Number.isFinite(hi)) throw new RangeError(`ticks need a finite range, got [${lo}, ${hi}]`);
  let a = Math.min(lo, hi);
  let b = Math.max(lo, hi);
  if (a === b) {
    const pad = integer ? 1 : a === 0 ? 1 : Math.abs(a) * 0.1;
    a -= pad;
    b += pad;
  }
  let step = niceStep((b - a) / Math.max(1, count));
  if (integer) step = Math.max(1, Math.round(step));
  const first = Math.floor(a / step + 1e-9);
  const last = Math.ceil(b / step - 1e-9);
  const values: number[] = [];
  for (let k = first; k <= last; k++) values.push(cleanFloat(k * step));
  return { min: values[0]!, max: values[values.length - 1]!, step, values };
}

/** `k * step` without the float noise (0.30000000000000004 -> 0.3). */
function cleanFloat(value: number): number {
  return value === 0 ? 0 : Number(value.toPrecision(12));
}

/**
 * A tick's label with as many decimals as the step needs: 0.25 with step 0.05 -> `0.25`,
 * 200 with step 50 -> `200`. Very small or very large axes use exponents (`2e-8`, `1.5e6`)
 * so a label stays a few characters wide.
 */
export function formatTick(value: number, step: number): string {
  if (value === 0) return "0";
  const magnitude = Math.max(Math.abs(value), step);
  if (magnitude >= 1e5 || step < 1e-3) {
    const digits = Math.max(0, Math.floor(Math.log10(Math.abs(value))) - Math.floor(Math.log10(step) + 1e-9));
    return value
      .toExponential(Math.min(6, digits))
      .replace(/\.?0+e/, "e")
      .replace("e+", "e");
  }
  const decimals = Math.max(0, -Math.floor(Math.log10(step) + 1e-9));
  return value.toFixed(Math.min(10, decimals));
}
