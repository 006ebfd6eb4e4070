/**
 * What the episode viewer shows of one episode, turn by turn, and how it is read from an
 * episode folder as `vagen eval` writes it (messages.json, metrics.json, images/) or as
 * the trainer writes its rollouts under `rollouts/step_<N>/` in the same layout.
 *
 * Images stay file paths until the viewer draws one, so a run with many episodes costs
 * only their text. The files may hold anything: fields of the wrong type are read as
 * absent, and text is made printable (`printable.ts`) as it is read, so what the viewer
 * and `vagen monitor --once` show can never act on the terminal.
 */
import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import type { RGBImage } from "../core/image.ts";
import type { EpisodeMetrics, FinishReason } from "../evaluation/episode-metrics.ts";
import { printable } from "./printable.ts";
import { type TextPart, splitReply } from "./text-parts.ts";

/** An observation image: a PNG file's path, or pixels of an episode still running. */
export type ImageSource = string | RGBImage;

/** How a turn's reward came about, where the env said so. */
export interface RewardSplit {
  /** The format bonus, when the env reports it (`info.format_reward`). */
  format?: number;
  /** World-model rewards: the sum of `info["state_reward/<name>"]` (perception, prediction judges). */
  worldModel?: number;
  /** The rest: the turn's reward less the format and world-model parts. */
  env: number;
}

export interface TurnView {
  /** 1-based. */
  index: number;
  reply: string;
  parts: TextPart[];
  /** The actions the env parsed out of the reply (`info.actions`). */
  actions: string[];
  formatCorrect?: boolean;
  reward: number;
  rewardSplit: RewardSplit;
  done: boolean;
  /** The observation the env answered with. */
  observationText: string;
  /** The observation's images (absolute paths once the episode is written). */
  images: ImageSource[];
}

export interface EpisodeView {
  /** Unique within a run: the folder's path under the run (with the step for training rollouts). */
  id: string;
  tag: string;
  seed: number;
  step?: number;
  success: boolean;
  reward: number;
  finishReason: FinishReason;
  error?: string;
  initialText: string;
  initialImages: ImageSource[];
  turns: TurnView[];
  /** Still running: turns are added as they finish (eval's live view). */
  running?: boolean;
}

/** An env's step info as metrics.json holds it (VAGEN's keys; the TUI never imports envs). */
type EnvInfo = Record<string, unknown>;

/** A message as messages.json holds it (src/evaluation/outputs.ts). */
interface DumpedMessage {
  role: string;
  content: ({ type: "text"; text: string } | { type: "image"; path: string })[];
  turn?: number;
  reward?: number;
  done?: boolean;
}

export function rewardSplit(reward: number, info: EnvInfo | undefined): RewardSplit {
  const wmScores = Object.entries(info ?? {})
    .filter(([key, value]) => key.startsWith("state_reward/") && typeof value === "number")
    .map(([, value]) => value as number);
  const worldModel = wmScores.length > 0 ? wmScores.reduce((a, b) => a + b, 0) : undefined;
  const format = typeof info?.format_reward === "number" ? info.format_reward : undefined;
  return { format, worldModel, env: reward - (worldModel ?? 0) - (format ?? 0) };
}

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

/** The parts of a message's content that are objects (junk entries dropped). */
function contentOf(message: DumpedMessage | undefined): Record<string, unknown>[] {
  return Array.isArray(message?.content) ? (message.content as unknown[]).filter(isObject) : [];
}

function textOf(message: DumpedMessage | undefined): string {
  return printable(
    contentOf(message)
      .flatMap((p) => (p.type === "text" && typeof p.text === "string" ? [p.text] : []))
      .join("\n"),
  );
}

function imagesOf(message: DumpedMessage | undefined, dir: string): string[] {
  return contentOf(message).flatMap((p) => (p.type === "image" && typeof p.path === "string" ? [join(dir, p.path)] : []));
}

function readJson<T>(path: string): T | undefined {
  try {
    return JSON.parse(readFileSync(path, "utf8")) as T;
  } catch {
    return undefined;
  }
}

const finite = (value: unknown): number | undefined => (typeof value === "number" && Number.isFinite(value) ? value : undefined);

/**
 * The episode in `dir`, or undefined while it is unfinished (no metrics.json yet, or one
 * that does not parse). An episode that failed before it ran has metrics but no
 * messages: it is shown with its error and no turns.
 */
export function loadEpisode(dir: string, step?: number, id?: string): EpisodeView | undefined {
  const metrics = readJson<unknown>(join(dir, "metrics.json"));
  if (!isObject(metrics)) return undefined;
  const m = metrics as Partial<EpisodeMetrics> & Record<string, unknown>;
  const dumped = existsSync(join(dir, "messages.json")) ? readJson<unknown>(join(dir, "messages.json")) : undefined;
  const messages = (Array.isArray(dumped) ? dumped : []).filter((msg): msg is DumpedMessage => isObject(msg) && typeof msg.role === "string");
  const infos = Array.isArray(m.infos) ? (m.infos as unknown[]) : [];
  const rewards = Array.isArray(m.rewards) ? (m.rewards as unknown[]) : [];
  const initial = messages.find((msg, i) => msg.role === "user" && messages.slice(0, i).every((p) => p.role !== "assistant"));
  const turns: TurnView[] = [];
  messages.forEach((message, i) => {
    if (message.role !== "assistant") return;
    const index = finite(message.turn) ?? turns.length + 1;
    const info = isObject(infos[index]) ? (infos[index] as EnvInfo) : undefined;
    const reply = textOf(message);
    const reward = finite(message.reward) ?? finite(rewards[index - 1]) ?? 0;
    const observation = messages[i + 1]?.role === "user" ? messages[i + 1] : undefined;
    turns.push({
      index,
      reply,
      parts: splitReply(reply),
      actions: Array.isArray(info?.actions) ? (info.actions as unknown[]).map((a) => printable(String(a))) : [],
      formatCorrect: typeof info?.format_correct === "boolean" ? info.format_correct : undefined,
      reward,
      rewardSplit: rewardSplit(reward, info),
      done: message.done === true,
      observationText: textOf(observation),
      images: imagesOf(observation, dir),
    });
  });
  const tag = typeof m.tag === "string" ? printable(m.tag) : "?";
  const seed = finite(m.seed) ?? Number.NaN;
  const error = isObject(m.error) && typeof m.error.message === "string" ? printable(m.error.message) : undefined;
  return {
    id: id ?? (step === undefined ? `${tag}/seed_${seed}` : `step ${step} ${tag}/seed_${seed}`),
    tag,
    seed,
    step,
    success: m.success === true,
    reward: finite(m.cumulative_reward) ?? 0,
    finishReason: (typeof m.finish_reason === "string" ? printable(m.finish_reason) : "unknown") as FinishReason,
    error,
    initialText: textOf(initial),
    initialImages: imagesOf(initial, dir),
    turns,
  };
}
