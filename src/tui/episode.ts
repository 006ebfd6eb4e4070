/**
 * What the episode viewer shows of one episode, turn by turn, and how it is read from an
 * episode folder as `vagen eval` writes it (messages.json, metrics.json, images/) or as
 * the trainer writes its rollouts under `rollouts/step_<N>/` in the same layout.
 *
 * Images stay file paths until the viewer draws one, so a run with many episodes costs
 * only their text.
 */
import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import type { RGBImage } from "../core/image.ts";
import type { EpisodeMetrics, FinishReason } from "../evaluation/episode-metrics.ts";
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

function textOf(message: DumpedMessage | undefined): string {
  return (message?.content ?? []).flatMap((p) => (p.type === "text" ? [p.text] : [])).join("\n");
}

function imagesOf(message: DumpedMessage | undefined, dir: string): string[] {
  return (message?.content ?? []).flatMap((p) => (p.type === "image" ? [join(dir, p.path)] : []));
}

function readJson<T>(path: string): T | undefined {
  try {
    return JSON.parse(readFileSync(path, "utf8")) as T;
  } catch {
    return undefined;
  }
}

/**
 * The episode in `dir`, or undefined while it is unfinished (no metrics.json yet, or one
 * that does not parse). An episode that failed before it ran has metrics but no
 * messages: it is shown with its error and no turns.
 */
export function loadEpisode(dir: string, step?: number, id?: string): EpisodeView | undefined {
  const metrics = readJson<EpisodeMetrics>(join(dir, "metrics.json"));
  if (!metrics) return undefined;
  const messages = existsSync(join(dir, "messages.json")) ? (readJson<DumpedMessage[]>(join(dir, "messages.json")) ?? []) : [];
  const initial = messages.find((m, i) => m.role === "user" && messages.slice(0, i).every((p) => p.role !== "assistant"));
  const turns: TurnView[] = [];
  messages.forEach((message, i) => {
    if (message.role !== "assistant") return;
    const index = message.turn ?? turns.length + 1;
    const info = metrics.infos?.[index];
    const reply = textOf(message);
    const reward = message.reward ?? metrics.rewards?.[index - 1] ?? 0;
    const observation = messages[i + 1]?.role === "user" ? messages[i + 1] : undefined;
    turns.push({
      index,
      reply,
      parts: splitReply(reply),
      actions: Array.isArray(info?.actions) ? (info.actions as unknown[]).map(String) : [],
      formatCorrect: typeof info?.format_correct === "boolean" ? info.format_correct : undefined,
      reward,
      rewardSplit: rewardSplit(reward, info),
      done: message.done ?? false,
      observationText: textOf(observation),
      images: imagesOf(observation, dir),
    });
  });
  return {
    id: id ?? (step === undefined ? `${metrics.tag}/seed_${metrics.seed}` : `step ${step} ${metrics.tag}/seed_${metrics.seed}`),
    tag: metrics.tag,
    seed: metrics.seed,
    step,
    success: metrics.success,
    reward: metrics.cumulative_reward,
    finishReason: metrics.finish_reason,
    error: metrics.error?.message,
    initialText: textOf(initial),
    initialImages: imagesOf(initial, dir),
    turns,
  };
}
