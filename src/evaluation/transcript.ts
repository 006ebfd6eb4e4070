/** transcript.md: an episode as a person reads it, images inline. */
import type { Observation } from "../../envs/_common/types.ts";
import type { EpisodeRecord } from "../harness/types.ts";
import type { EpisodeMetrics } from "./episode-metrics.ts";
import { observationImageName } from "./layout.ts";

export function renderTranscript(record: EpisodeRecord, metrics: EpisodeMetrics): string {
  const out: string[] = [];
  const outcome = metrics.success ? "success" : "no success";
  out.push(`# ${metrics.env_name} (${metrics.tag}), seed ${metrics.seed}`, "");
  out.push(
    `${outcome}; reward ${round(metrics.cumulative_reward)}; ${metrics.num_turns} turn(s); finished: ${metrics.finish_reason}; harness ${metrics.harness}; model ${metrics.model}`,
    "",
  );
  if (metrics.error) out.push(`**${metrics.error.kind}:** ${metrics.error.message}`, "");
  out.push("## System prompt", "", fence(record.systemPrompt.text), "");
  out.push("## Observation 0", "", ...observation(record.initialObservation, 0), "");
  for (const t of record.turns) {
    out.push(`## Turn ${t.index}`, "", "**Model:**", "", fence(t.completion.text), "");
    const actions = Array.isArray(t.info.actions) ? ` actions ${JSON.stringify(t.info.actions)};` : "";
    const format = typeof t.info.format_correct === "boolean" ? ` format ${t.info.format_correct ? "ok" : "error"};` : "";
    out.push(`**Env:**${actions}${format} reward ${round(t.reward)}; done ${t.done}`, "");
    out.push(`### Observation ${t.index}`, "", ...observation(t.observation, t.index), "");
  }
  return `${out.join("\n")}\n`;
}

/** The observation text, each image placeholder's image shown after the text. */
function observation(obs: Observation, turn: number): string[] {
  const lines = [fence(obs.text)];
  obs.images.forEach((img, i) => lines.push("", `![observation ${turn} image ${i} (${img.width}x${img.height})](${observationImageName(turn, i)})`));
  return lines;
}

/** A fenced block long enough that the text's own backticks can't close it. */
function fence(text: string): string {
  const longest = Math.max(2, ...[...text.matchAll(/`+/g)].map((m) => m[0].length));
  const ticks = "`".repeat(longest + 1);
  return `${ticks}text\n${text}\n${ticks}`;
}

function round(x: number): string {
  return Number.isInteger(x) ? String(x) : x.toFixed(3);
}
