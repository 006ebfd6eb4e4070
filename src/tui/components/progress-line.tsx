import { Box, Text } from "ink";
import { progressBar } from "../format.ts";

/** `label [████░░░░] done/total suffix`, the bar taking the width left over. */
export function ProgressLine({ label, done, total, width, suffix = "" }: { label: string; done: number; total?: number; width: number; suffix?: string }) {
  const count = total ? `${done}/${total}` : `${done}`;
  const barWidth = Math.max(4, width - label.length - count.length - suffix.length - 5);
  return (
    <Box width={width}>
      <Text wrap="truncate">
        <Text bold>{label}</Text> <Text color="green">{progressBar(done, total, barWidth)}</Text> {count}
        {suffix ? <Text dimColor> {suffix}</Text> : null}
      </Text>
    </Box>
  );
}
