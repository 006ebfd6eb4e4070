/**
 * A training run's metrics.jsonl as records to plot: one JSON object per line with a
 * whole-number `step` and metric values. Lenient on purpose, since plots are drawn from
 * runs that crashed or are still writing: a line that is not such an object (junk, a
 * line cut off mid-write) is counted and skipped; `null`, and the bare `NaN` /
 * `Infinity` that Python's json module writes, are kept as gaps; a step written again (a
 * resumed run) replaces the earlier line.
 */
import { readFileSync } from "node:fs";

/** One step's metrics; `null` where the run reported a value that is not a finite number. */
export interface MetricRecord {
  step: number;
  values: Readonly<Record<string, number | null>>;
}

export interface MetricsFile {
  /** Ascending by step, one per step. */
  records: MetricRecord[];
  /** Non-empty lines that were not a metrics record. */
  skipped: number;
}

/**
 * A line of metrics.jsonl as JSON, with Python's non-standard `NaN`, `Infinity` and
 * `-Infinity` (what json.dumps writes for them) read as null. Throws on anything else
 * that is not JSON.
 */
export function parseMetricsJson(line: string): unknown {
  try {
    return JSON.parse(line);
  } catch {
    // Only where a value stands (after `:` or `[` / `,`), so text inside a string is left alone.
    const patched = line.replace(/([:,[]\s*)(-?Infinity|NaN)(?=\s*[,}\]])/g, "$1null");
    if (patched === line) throw new SyntaxError("not JSON");
    return JSON.parse(patched);
  }
}

/** The record a line holds, or undefined when it holds none. */
function recordOf(line: string): MetricRecord | undefined {
  let value: unknown;
  try {
    value = parseMetricsJson(line);
  } catch {
    return undefined;
  }
  if (typeof value !== "object" || value === null || Array.isArray(value)) return undefined;
  const { step, ...rest } = value as Record<string, unknown>;
  if (typeof step !== "number" || !Number.isInteger(step) || step < 0) return undefined;
  const values: Record<string, number | null> = {};
  for (const [key, v] of Object.entries(rest)) {
    if (typeof v === "number") values[key] = Number.isFinite(v) ? v : null;
    else if (v === null) values[key] = null;
  }
  return { step, values };
}

export function parseMetricsText(text: string): MetricsFile {
  const byStep = new Map<number, MetricRecord>();
  let skipped = 0;
  const lines = text.split("\n");
  // A last line without its newline may still be being written: read it only if it parses.
  lines.forEach((line, i) => {
    if (line.trim() === "") return;
    const record = recordOf(line);
    if (record) byStep.set(record.step, record);
    else if (i < lines.length - 1) skipped++;
  });
  return { records: [...byStep.values()].sort((a, b) => a.step - b.step), skipped };
}

export function readMetricsFile(path: string): MetricsFile {
  return parseMetricsText(readFileSync(path, "utf8"));
}
