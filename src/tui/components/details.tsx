import { Box, Text } from "ink";
import { formatValue, truncate } from "../format.ts";
import type { DashboardState } from "../state.ts";
import { WarningList } from "./notices.tsx";

/**
 * Everything that does not fit the overview: the last validation table, every metric's
 * latest value, checkpoints, warnings and notes.
 */
export function Details({ state, width, height, offset = 0 }: { state: DashboardState; width: number; height: number; offset?: number }) {
  const half = Math.max(20, Math.floor(width / 2) - 1);
  const metricRows = Math.max(1, height - 2);
  const metrics = Object.entries(state.series)
    .filter(([key]) => !key.startsWith("val/"))
    .map(([key, s]) => [key, s.values[s.values.length - 1]] as const);
  const v = state.validation;
  const right = width - half - 1;
  // ↑/↓ scroll the metric list; the offset is clamped so the last page stays full.
  const first = Math.max(0, Math.min(offset, metrics.length - metricRows));
  const keyWidth = Math.max(8, Math.min(right - 10, Math.max(0, ...metrics.map(([k]) => k.length))));
  return (
    <Box flexDirection="row" width={width} height={height}>
      <Box flexDirection="column" width={half}>
        {v ? (
          <>
            <Text bold>
              validation at step {v.step}
              {v.best ? " (best so far)" : ""}
            </Text>
            {Object.entries(v.metrics).slice(0, Math.max(1, Math.floor(height / 2) - 1)).map(([key, value]) => (
              <Text key={key} wrap="truncate">
                {truncate(key, half - 10).padEnd(Math.min(half - 10, 36))} {formatValue(value).padStart(8)}
              </Text>
            ))}
          </>
        ) : (
          <Text dimColor>no validation yet</Text>
        )}
        <Text bold>checkpoints</Text>
        {state.checkpoints.length === 0 ? <Text dimColor>none yet</Text> : null}
        {state.checkpoints.slice(-3).map((c) => (
          <Text key={c.path} wrap="truncate" color="blue">
            step {c.step}
            {c.bestActor ? " best actor" : ""}: {c.path}
          </Text>
        ))}
        <Text bold>warnings</Text>
        <WarningList warnings={state.warnings} width={half} rows={3} />
        {state.notes.slice(-2).map((n, i) => (
          <Text key={i} dimColor wrap="truncate">
            {n}
          </Text>
        ))}
      </Box>
      <Box flexDirection="column" width={right} marginLeft={1}>
        <Text bold>latest metrics</Text>
        {metrics.length === 0 ? <Text dimColor>none yet</Text> : null}
        {metrics.slice(first, first + metricRows).map(([key, value]) => (
          <Text key={key} wrap="truncate">
            {truncate(key, keyWidth).padEnd(keyWidth)} {formatValue(value).padStart(8)}
          </Text>
        ))}
        {metrics.length > metricRows ? (
          <Text dimColor>
            {first + 1}-{Math.min(metrics.length, first + metricRows)} of {metrics.length} (↑/↓ to scroll)
          </Text>
        ) : null}
      </Box>
    </Box>
  );
}
