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
  const chartHeight = Math.max(3, Math.min(8, Math.floor(chartArea / Math.max(1, Math.ceil(charts.length / columns)))));
  const chartRows = Math.max(1, Math.floor(chartArea / chartHeight));
  const shown = charts.slice(0, chartRows * columns);
  const chartWidth = Math.floor(width / columns) - 1;

  return (
    <Box flexDirection="column" width={width} height={height}>
      {phase ? (
        <ProgressLine label={phase.name} done={phase.done} total={phase.total} width={width} suffix={`${unit} ${rate}${rollout}`} />
      ) : (
        <Text dimColor>{state.finished ? `run ${state.finished.reason}` : "waiting for the next phase"}</Text>
      )}
      <Text dimColor wrap="truncate">{status || " "}</Text>
      {charts.length === 0 ? <Text dimColor>no metrics yet: charts appear after the first step</Text> : null}
      <Box flexDirection="row" flexWrap="wrap" width={width}>
        {shown.map(({ label, key }) => (
          <Box key={key} width={chartWidth + 1} height={chartHeight}>
            <MetricChart label={label} series={state.series[key]!} width={chartWidth} height={chartHeight} />
          </Box>
        ))}
      </Box>
      {charts.length > shown.length ? <Text dimColor>{charts.length - shown.length} more chart(s) in a bigger terminal; all metrics in the details pane</Text> : null}
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
