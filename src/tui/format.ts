/**
 * Small text formatters shared by the dashboard and the `--once` summary: progress bars,
 * durations, ETAs and metric values. Pure functions of their arguments.
 */

/** `[#####-----]`-style bar of exactly `width` cells; an unknown total draws an empty bar. */
export function progressBar(done: number, total: number | undefined, width: number): string {
  const cells = Math.max(1, Math.floor(width));
  if (!total || total <= 0) return "░".repeat(cells);
  const filled = Math.max(0, Math.min(cells, Math.round((done / total) * cells)));
  return "█".repeat(filled) + "░".repeat(cells - filled);
}

/** `1h02m`, `3m05s`, `42s`. */
export function formatDuration(seconds: number): string {
  if (!Number.isFinite(seconds) || seconds < 0) return "-";
  const s = Math.round(seconds);
  if (s < 60) return `${s}s`;
  const m = Math.floor(s / 60);
  if (m < 60) return `${m}m${String(s % 60).padStart(2, "0")}s`;
  const h = Math.floor(m / 60);
  return `${h}h${String(m % 60).padStart(2, "0")}m`;
}

/**
 * Time left at the average pace so far: `elapsed / done * (total - done)`. Undefined until
 * something is done, since there is no pace to go by.
 */
export function estimateRemaining(done: number, total: number, elapsedSeconds: number): number | undefined {
  if (done <= 0 || total <= done || elapsedSeconds <= 0) return done >= total && total > 0 ? 0 : undefined;
  return (elapsedSeconds / done) * (total - done);
}

/** A metric value in at most ~7 characters: 0.1235, -12.35, 1.23e+5, 3.0e-5. */
export function formatValue(value: number | undefined): string {
  if (value === undefined || Number.isNaN(value)) return "-";
  if (!Number.isFinite(value)) return value > 0 ? "inf" : "-inf";
  const abs = Math.abs(value);
  if (abs === 0) return "0";
  if (abs >= 1e5 || abs < 1e-3) return value.toExponential(1);
  if (abs >= 100) return value.toFixed(1);
  if (abs >= 10) return value.toFixed(2);
  return value.toFixed(4);
}

/** A ratio as a percentage with one decimal: 0.25 -> `25.0%`. */
export function formatPercent(ratio: number | undefined): string {
  return ratio === undefined || Number.isNaN(ratio) ? "-" : `${(ratio * 100).toFixed(1)}%`;
}

/** Cut `text` to `width` characters, marking the cut with an ellipsis. */
export function truncate(text: string, width: number): string {
  if (width <= 0) return "";
  return text.length <= width ? text : `${text.slice(0, Math.max(0, width - 1))}…`;
}
