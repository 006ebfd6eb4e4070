import { Box, Text } from "ink";
import type { EpisodeView, RewardSplit, TurnView } from "../episode.ts";
import { formatValue, truncate } from "../format.ts";
import type { TextPartKind } from "../text-parts.ts";
import { ImageView } from "./image-view.tsx";

const PART_STYLE: Record<TextPartKind, { label: string; color?: string; dim?: boolean; bold?: boolean }> = {
  think: { label: "think", color: "gray", dim: true },
  perception: { label: "perception", color: "cyan" },
  prediction: { label: "prediction", color: "magenta" },
  answer: { label: "answer", color: "green", bold: true },
  plain: { label: "text" },
};

export function rewardSplitText(split: RewardSplit): string {
  const parts = [`env ${formatValue(split.env)}`];
  if (split.format !== undefined) parts.push(`format ${formatValue(split.format)}`);
  if (split.worldModel !== undefined) parts.push(`world-model ${formatValue(split.worldModel)}`);
  return parts.join(" + ");
}

/** `text` hard-wrapped to `width` columns. */
function wrap(text: string, width: number): string[] {
  const lines: string[] = [];
  for (const paragraph of text.split("\n")) {
    if (paragraph === "") lines.push("");
    for (let at = 0; at < paragraph.length; at += width) lines.push(paragraph.slice(at, at + width));
  }
  return lines;
}

/** Wrap to `width` and keep at most `rows` lines (the rest is marked cut). */
function clip(text: string, width: number, rows: number): string {
  const lines = wrap(text, width);
  return lines.length <= rows ? lines.join("\n") : `${lines.slice(0, Math.max(0, rows - 1)).join("\n")}\n…`;
}

/** Rows each reply part may take: an equal share of `rows`. */
function rowsPerPart(turn: TurnView, rows: number): number {
  return Math.max(1, Math.floor(rows / Math.max(1, turn.parts.length)));
}

/** Rows the reply takes on screen, so the observation can have the rest. */
function replyRows(turn: TurnView, width: number, rows: number): number {
  if (turn.parts.length === 0) return 1;
  const perPart = rowsPerPart(turn, rows);
  return turn.parts.reduce((n, part) => n + Math.min(perPart, wrap(part.text, Math.max(8, width - PART_STYLE[part.kind].label.length - 2)).length), 0);
}

function Reply({ turn, width, rows }: { turn: TurnView; width: number; rows: number }) {
  const perPart = rowsPerPart(turn, rows);
  if (turn.parts.length === 0) return <Text dimColor>(empty reply)</Text>;
  return (
    <Box flexDirection="column">
      {turn.parts.map((part, i) => {
        const style = PART_STYLE[part.kind];
        return (
          <Box key={i} flexDirection="column">
            <Text color={style.color} dimColor={style.dim} bold={style.bold}>
              {style.label}: {clip(part.text, Math.max(8, width - style.label.length - 2), perPart)}
            </Text>
          </Box>
        );
      })}
    </Box>
  );
}

export interface EpisodeViewerProps {
  episodes: EpisodeView[];
  /** Which episode (index into `episodes`) and which turn (0: the initial observation). */
  episodeIndex: number;
  turnIndex: number;
  width: number;
  height: number;
}

/**
 * One episode, one turn at a time: the reply with its think / answer parts set apart,
 * the parsed actions, the reward and its split, and the observation that came back
 * (image on the right when there is room, below otherwise).
 */
export function EpisodeViewer({ episodes, episodeIndex, turnIndex, width, height }: EpisodeViewerProps) {
  const episode = episodes[episodeIndex];
  if (!episode) return <Text dimColor>no episodes yet: they appear here as they finish</Text>;
  const turn = turnIndex > 0 ? episode.turns[turnIndex - 1] : undefined;
  const images = turn ? turn.images : episode.initialImages;
  const observation = turn ? turn.observationText : episode.initialText;
  const imageColumns = images.length > 0 ? Math.min(32, Math.max(12, Math.floor(width * 0.3))) : 0;
  const textWidth = Math.max(20, width - imageColumns - 2);
  const outcome = episode.running
    ? "running"
    : episode.error
      ? `${episode.finishReason}: ${episode.error}`
      : episode.success
        ? "success"
        : episode.finishReason === "max_turns"
          ? "turn limit"
          : "fail";
  const bodyRows = Math.max(3, height - 4);
  // The reply gets most of the body; the observation keeps at least three rows.
  const replyBudget = Math.max(2, bodyRows - 4);
  return (
    <Box flexDirection="column" width={width} height={height}>
      <Text wrap="truncate">
        <Text bold>
          episode {episodeIndex + 1}/{episodes.length}
        </Text>{" "}
        {episode.id} <Text color={episode.success ? "green" : episode.error ? "red" : "yellow"}>{truncate(outcome, 60)}</Text> reward{" "}
        {formatValue(episode.reward)}, {episode.turns.length} turn(s)
      </Text>
      <Text wrap="truncate">
        <Text bold>{turn ? `turn ${turn.index}/${episode.turns.length}` : `initial observation (turn 0/${episode.turns.length})`}</Text>
        {turn ? (
          <Text>
            {"  "}reward {formatValue(turn.reward)} = {rewardSplitText(turn.rewardSplit)}
            {"  "}actions: <Text color="green">{turn.actions.length ? turn.actions.join(", ") : "none"}</Text>
            {turn.formatCorrect === undefined ? "" : turn.formatCorrect ? "  format ✓" : "  format ✗"}
            {turn.done ? "  done" : ""}
          </Text>
        ) : null}
      </Text>
      <Box flexDirection="row" height={bodyRows}>
        <Box flexDirection="column" width={textWidth}>
          {turn ? <Reply turn={turn} width={textWidth} rows={replyBudget} /> : null}
          <Text dimColor>{clip(`observation: ${observation}`, textWidth, turn ? Math.max(3, bodyRows - replyRows(turn, textWidth, replyBudget)) : bodyRows)}</Text>
        </Box>
        {images.length > 0 ? (
          <Box flexDirection="column" marginLeft={2} width={imageColumns}>
            <ImageView source={images[0]!} maxColumns={imageColumns} />
          </Box>
        ) : null}
      </Box>
      <Text dimColor wrap="truncate">
        ←/→ episode ↑/↓ turn g/G first/last episode
      </Text>
    </Box>
  );
}
