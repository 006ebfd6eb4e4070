import { Box, Text } from "ink";
import { formatPercent, formatValue, progressBar, truncate } from "../format.ts";
import type { DashboardState } from "../state.ts";

/** The eval view's main pane: progress, running success rate and reward per env, failures. */
export function EvalOverview({ state, width, height }: { state: DashboardState; width: number; height: number }) {
  const done = state.evalEnvs.reduce((n, e) => n + e.done, 0);
  const planned = state.evalEnvs.reduce((n, e) => n + e.planned, 0);
  const tagWidth = Math.min(24, Math.max(3, ...state.evalEnvs.map((e) => e.tag.length)));
  const barWidth = Math.max(6, width - tagWidth - 48);
  const failureRows = Math.max(0, height - state.evalEnvs.length - 4);
  if (state.starting && state.evalEnvs.length === 0) {
    // The model loads before the first event: say so rather than draw an empty table.
    return (
      <Box flexDirection="column" width={width} height={height}>
        <Text dimColor wrap="truncate">
          {state.starting}
        </Text>
      </Box>
    );
  }
  return (
    <Box flexDirection="column" width={width} height={height}>
      <Text>
        <Text bold>episodes</Text> {done}/{planned}
        {state.evalRunning ? <Text dimColor>  running {state.evalRunning}</Text> : null}
        {state.finished ? <Text color="green">  finished</Text> : null}
      </Text>
      <Text dimColor wrap="truncate">
        {"env".padEnd(tagWidth)} {"progress".padEnd(barWidth)} {"done".padStart(9)} {"success".padStart(7)} {"reward".padStart(8)} {"errors".padStart(6)}
      </Text>
      {state.evalEnvs.map((e) => (
        <Text key={e.tag} wrap="truncate">
          {truncate(e.tag, tagWidth).padEnd(tagWidth)} <Text color="green">{progressBar(e.done, e.planned, barWidth)}</Text> {`${e.done}/${e.planned}`.padStart(9)}{" "}
          {formatPercent(e.done ? e.successes / e.done : undefined).padStart(7)} {(e.done ? formatValue(e.rewardSum / e.done) : "-").padStart(8)}{" "}
          <Text color={e.errors ? "red" : undefined}>{String(e.errors).padStart(6)}</Text>
        </Text>
      ))}
      {state.failures.length > 0 && failureRows > 1 ? (
        <Box flexDirection="column" marginTop={1}>
          <Text bold color="red">
            failures ({state.failures.length})
          </Text>
          {state.failures.slice(-(failureRows - 1)).map((f, i) => (
            <Text key={i} wrap="truncate" color="red">
              {truncate(`${f.tag} seed ${f.seed}: ${f.reason}${f.message ? `: ${f.message.replace(/\s+/g, " ")}` : ""}`, width)}
            </Text>
          ))}
        </Box>
      ) : null}
    </Box>
  );
}
