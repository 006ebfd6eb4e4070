/**
 * `vagen monitor --once`: the dashboard's content as plain text for scripts and logs. No
 * colours, no cursor movement; one table per section. Everything in it may come from a
 * run's files, so the whole text is made printable: a control byte is shown, not obeyed.
 */
import { seriesRange, sparkline } from "./chart.ts";
import { formatDuration, formatPercent, formatValue } from "./format.ts";
import { GPU_MEMORY_KEYS, THROUGHPUT_KEY, chartedMetrics } from "./key-metrics.ts";
import { printable } from "./printable.ts";
import { type DashboardState, latest, stepEta } from "./state.ts";

/** Cells of a trend column; a longer series is averaged into this many buckets. */
const TREND_CELLS = 24;
/** Validations listed by step (the newest); the trend row covers all of them. */
const VALIDATIONS_LISTED = 12;

/** Aligned columns: text columns (the first, and any in `left`) to the left, numbers to the right. */
function table(rows: string[][], left: readonly number[] = []): string[] {
  const widths = rows[0]!.map((_, c) => Math.max(...rows.map((r) => (r[c] ?? "").length)));
  return rows.map((r) => r.map((cell = "", c) => (c === 0 || left.includes(c) ? cell.padEnd(widths[c]!) : cell.padStart(widths[c]!))).join("  ").trimEnd());
}

function trainSummary(state: DashboardState): string[] {
  const out: string[] = [];
  const total = state.totalSteps ? `/${state.totalSteps}` : "";
  const eta = stepEta(state);
  out.push(`train run ${state.outputDir ?? ""}: step ${state.step}${total}${eta !== undefined ? `, ETA ${formatDuration(eta)}` : ""}${state.finished ? `, finished (${state.finished.reason})` : ""}`);
  const charted = chartedMetrics(state);
  if (charted.length > 0) {
    // min, max and the trend all span every reported step of the metric (the steps column).
    out.push("", ...table([["metric", "latest", "min", "max", "steps", "trend over those steps"], ...charted.map(({ label, series }) => {
      const range = seriesRange(series.values);
      const steps = series.steps.length > 0 ? `${series.steps[0]}-${series.steps[series.steps.length - 1]}` : "-";
      return [label, formatValue(series.values[series.values.length - 1]), formatValue(range?.min), formatValue(range?.max), steps, sparkline(series.values, TREND_CELLS)];
    })], [5]));
  }
  const throughput = latest(state, THROUGHPUT_KEY);
  const memoryKey = GPU_MEMORY_KEYS.find((k) => state.series[k]);
  if (throughput !== undefined || memoryKey) {
    out.push("", `throughput ${formatValue(throughput)} tokens/s${memoryKey ? `, GPU memory ${formatValue(latest(state, memoryKey))} GB` : ""}`);
  }
  const validations = state.validations;
  if (validations.steps.length > 0) {
    const recent = validations.steps.slice(-VALIDATIONS_LISTED).map((step, i, shown) => `${step}: ${formatValue(validations.values[validations.values.length - shown.length + i])}`);
    const older = validations.steps.length - recent.length;
    out.push("", `validation mean reward by step: ${older > 0 ? `(${older} earlier) ` : ""}${recent.join(", ")}`);
  }
  if (state.validation) {
    const v = state.validation;
    out.push("", `validation at step ${v.step}:`, ...table([["metric", "value"], ...Object.entries(v.metrics).map(([k, value]) => [k, formatValue(value)])]));
  }
  if (state.checkpoints.length > 0) {
    out.push("", `checkpoints: ${state.checkpoints.map((c) => `step ${c.step}${c.bestActor ? " (best actor)" : ""}`).join(", ")}`);
  }
  return out;
}

function evalSummary(state: DashboardState): string[] {
  const out = [`eval run ${state.outputDir ?? ""}${state.finished ? ": finished" : ": running"}`, ""];
  out.push(...table([["env", "done", "success", "mean reward", "errors"], ...state.evalEnvs.map((e) => [
    e.tag,
    `${e.done}/${e.planned}`,
    formatPercent(e.done ? e.successes / e.done : undefined),
    e.done ? formatValue(e.rewardSum / e.done) : "-",
    String(e.errors),
  ])]));
  if (state.failures.length > 0) {
    out.push("", "failures:", ...state.failures.map((f) => `  ${f.tag} seed ${f.seed}: ${f.reason}${f.message ? `: ${f.message.slice(0, 160)}` : ""}`));
  }
  return out;
}

export function summaryText(state: DashboardState): string {
  const out = state.kind === "eval" ? evalSummary(state) : state.kind === "train" ? trainSummary(state) : [`${state.outputDir ?? "run"}: nothing recognisable yet (no metrics.jsonl, rollouts/ or eval config.yaml)`];
  const episodes = state.episodes;
  if (episodes.length > 0) {
    const successes = episodes.filter((e) => e.success).length;
    const steps = [...new Set(episodes.flatMap((e) => (e.step === undefined ? [] : [e.step])))];
    out.push("", `episodes loaded: ${episodes.length}${steps.length ? ` (rollouts of step ${steps.join(", ")})` : ""}, ${successes} successful`);
  }
  if (state.warnings.length > 0) {
    out.push("", "warnings:", ...state.warnings.map((w) => `  ${w.step ? `step ${w.step}: ` : ""}${w.message}${w.count > 1 ? ` (x${w.count})` : ""}`));
  }
  return printable(`${out.join("\n")}\n`);
}
