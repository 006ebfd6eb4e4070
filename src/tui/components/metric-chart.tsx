import { Box, Text } from "ink";
import { brailleChart, seriesRange } from "../chart.ts";
import { formatValue, truncate } from "../format.ts";
import type { Series } from "../state.ts";

/**
 * A titled line chart over steps: the title with the latest value, the Braille line, and
 * the y range on the right (max on top, min below; a constant series its one value) so
 * the scale is never a guess.
 */
export function MetricChart({ label, series, width, height }: { label: string; series: Series; width: number; height: number }) {
  const values = series.values;
  const range = seriesRange(values);
  const latest = values[values.length - 1];
  const axis = range ? Math.max(formatValue(range.max).length, formatValue(range.min).length) : 1;
  const plotWidth = Math.max(4, width - axis - 1);
  const lines = brailleChart(values, plotWidth, Math.max(1, height - 1), range);
  const first = series.steps[0];
  const last = series.steps[series.steps.length - 1];
  return (
    <Box flexDirection="column" width={width}>
      <Text wrap="truncate">
        <Text bold>{truncate(label, width - 12)}</Text> <Text color="cyan">{formatValue(latest)}</Text>
        <Text dimColor>{first !== undefined ? ` steps ${first}-${last}` : ""}</Text>
      </Text>
      {lines.map((line, i) => (
        <Text key={i} wrap="truncate">
          <Text color="green">{line}</Text>
          <Text dimColor> {i === 0 && range ? formatValue(range.max) : i === lines.length - 1 && range && range.min !== range.max ? formatValue(range.min) : ""}</Text>
        </Text>
      ))}
    </Box>
  );
}
