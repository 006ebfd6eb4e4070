import { Box, Text } from "ink";
import { truncate } from "../format.ts";
import type { Notice } from "../state.ts";

function noticeText(n: Notice): string {
  return `${n.step ? `step ${n.step}: ` : ""}${n.message.replace(/\s+/g, " ")}${n.count > 1 ? ` (x${n.count})` : ""}`;
}

/** The newest warning on one line, with how many there are: never more than one row. */
export function WarningLine({ warnings, width }: { warnings: Notice[]; width: number }) {
  const last = warnings[warnings.length - 1];
  if (!last) return null;
  const prefix = warnings.length > 1 ? `⚠ ${warnings.length} warnings, latest: ` : "⚠ ";
  return (
    <Text color="yellow" wrap="truncate">
      {truncate(prefix + noticeText(last), width)}
    </Text>
  );
}

/** The newest `rows` warnings, one line each. */
export function WarningList({ warnings, width, rows }: { warnings: Notice[]; width: number; rows: number }) {
  if (warnings.length === 0) return <Text dimColor>no warnings</Text>;
  return (
    <Box flexDirection="column">
      {warnings.slice(-rows).map((w, i) => (
        <Text key={i} color="yellow" wrap="truncate">
          {truncate(`⚠ ${noticeText(w)}`, width)}
        </Text>
      ))}
    </Box>
  );
}
