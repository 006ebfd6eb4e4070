import { Box, Text } from "ink";
import { formatDuration, formatValue } from "../format.ts";
import { GPU_MEMORY_KEYS, THROUGHPUT_KEY, chartedMetrics } from "../key-metrics.ts";
import { type DashboardState, latest } from "../state.ts";
import { MetricChart } from "./metric-chart.tsx";
import { ProgressLine } from "./progress-line.tsx";

const PHASE_UNITS: Record<string, string> = { rollout: "episodes", critic_update: "micro-batches", actor_update: "micro-batches", validation: "episodes" };

/** Columns of charts for the terminal width: 1 below 60 columns, up to 3 from 150. */
export function chartColumns(width: number): number {
  return width >= 150 ? 3 : width >= 60 ? 2 : 1;
}

/** Chart rows are 3 to 12 lines: a title and at least two lines of dots; a tall terminal gets taller charts, up to 44 dots high. */
const CHART_LINES = { min: 3, max: 12 } as const;

/**
 * How `count` charts in `columns` fill `lines` of the pane: the height of each row shown
 * (rows share the lines left over, one each, so none go blank) and how many charts did
 * not fit (those get a line saying so, which the layout leaves room for).
 */
export function chartLayout(count: number, columns: number, lines: number): { rows: number[]; hidden: number } {
  const needed = Math.ceil(count / Math.max(1, columns));
  if (needed === 0) return { rows: [], hidden: 0 };
  const base = Math.max(CHART_LINES.min, Math.min(CHART_LINES.max, Math.floor(lines / needed)));
  let shown = Math.min(needed, Math.floor(lines / base));
  if (shown < needed) shown = Math.max(1, Math.floor((lines - 1) / base));
  const hidden = Math.max(0, count - shown * columns);
  let spare = lines - (hidden > 0 ? 1 : 0) - shown * base;
  const rows = Array.from({ length: shown }, () => {
    const extra = spare > 0 && base < CHART_LINES.max ? 1 : 0;
    spare -= extra;
    return base + extra;
  });
  return { rows, hidden };
}

/**
 * What the phase line says when no phase is in flight: how the run ended, what a live
 * view waits for before the run starts, or (for a view of the run's files, which record
 * finished steps but not phases) the last step written.
 */
export function idleLine(state: DashboardState): string {
  if (state.finished) return `run ${state.finished.reason}${state.finished.error ? `: ${state.finished.error}` : ""}`;
  if (state.starting) return state.starting;
  if (state.source === "files") {
    const total = state.totalSteps ? ` of ${state.totalSteps}` : "";
    return Object.keys(state.series).length > 0 ? `running: step ${state.step}${total} is the last one written (phases show live in vagen train)` : "waiting for the run's first step";
  }
  return "waiting for the next phase";
}

/**
 * The train view's main pane: the current phase with its progress, charts of the key
 * metrics (as many as fit), throughput and GPU memory, and the last validation.
 */
export function TrainOverview({ state, width, height }: { state: DashboardState; width: number; height: number }) {
  const phase = state.phase;
  const unit = phase ? (PHASE_UNITS[phase.name] ?? "done") : "";
  const rate = phase?.rate !== undefined ? `${formatValue(phase.rate)} ${unit}/s` : "";
  const rollout = phase?.name === "rollout" && state.rolloutEpisodes.step === phase.step && state.rolloutEpisodes.done > 0
    ? `  success ${((state.rolloutEpisodes.successes / state.rolloutEpisodes.done) * 100).toFixed(0)}%`
    : "";
  const throughput = latest(state, THROUGHPUT_KEY);
  const memoryKey = GPU_MEMORY_KEYS.find((k) => state.series[k]);
  const checkpoint = state.checkpoints[state.checkpoints.length - 1];
  const stepTime = state.stepSeconds.length ? state.stepSeconds[state.stepSeconds.length - 1] : latest(state, "timing_s/step");
  const status = [
    throughput !== undefined ? `throughput ${formatValue(throughput)} tok/s` : "",
    memoryKey ? `GPU mem ${formatValue(latest(state, memoryKey))} GB` : "",
    stepTime !== undefined ? `last step ${formatDuration(stepTime)}` : "",
    checkpoint ? `checkpoint step ${checkpoint.step}${checkpoint.bestActor ? " (best actor)" : ""}` : "",
  ].filter(Boolean).join("  ");

  const charts = chartedMetrics(state);
  const columns = chartColumns(width);
  // Tall terminals also show the last validation under the charts (in 80x24 it is in details).
  const validation = height >= 30 && state.validation ? Object.entries(state.validation.metrics).slice(0, 5) : [];
  const chartArea = height - 2 - (validation.length > 0 ? validation.length + 1 : 0);
  const { rows, hidden } = chartLayout(charts.length, columns, chartArea);
  const chartWidth = Math.floor(width / columns) - 1;
  let next = 0;
  const chartRowsShown = rows.map((rowHeight) => {
    const row = charts.slice(next, next + columns);
    next += columns;
    return { rowHeight, row };
  });

  return (
    <Box flexDirection="column" width={width} height={height}>
      {phase ? (
        <ProgressLine label={phase.name} done={phase.done} total={phase.total} width={width} suffix={`${unit} ${rate}${rollout}`} />
      ) : (
        <Text dimColor wrap="truncate">{idleLine(state)}</Text>
      )}
      <Text dimColor wrap="truncate">{status || " "}</Text>
      {charts.length === 0 ? <Text dimColor>no metrics yet: charts appear after the first step</Text> : null}
      {chartRowsShown.map(({ rowHeight, row }) => (
        <Box key={row[0]!.key} flexDirection="row" width={width} height={rowHeight}>
          {row.map(({ label, key, series }) => (
            <Box key={key} width={chartWidth + 1} height={rowHeight}>
              <MetricChart label={label} series={series} width={chartWidth} height={rowHeight} />
            </Box>
          ))}
        </Box>
      ))}
      {hidden > 0 ? <Text dimColor wrap="truncate">{hidden} more chart(s) in a bigger terminal; all metrics in the details pane</Text> : null}
      {validation.length > 0 ? (
        <Box flexDirection="column">
          <Text bold>validation at step {state.validation!.step}</Text>
          {validation.map(([key, value]) => (
            <Text key={key} wrap="truncate">
              {key.padEnd(40)} {formatValue(value)}
            </Text>
          ))}
        </Box>
      ) : null}
    </Box>
  );
}
