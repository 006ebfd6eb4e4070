/**
 * What one finished episode amounts to (the content of its metrics.json), and the rules
 * that decide success and format errors.
 */
import type { EnvInfo } from "../../envs/_common/types.ts";
import { reportedSuccess } from "../harness/observation.ts";
import type { EpisodeFinishReason, EpisodeRecord, TurnRecord } from "../harness/types.ts";

export type FinishReason = EpisodeFinishReason | "error";

export interface EpisodeMetrics {
  env_name: string;
  tag: string;
  seed: number;
  harness: string;
  model: string;
  max_turns: number;
  env_config: Record<string, unknown>;
  finish_reason: FinishReason;
  /** The env ended the episode (done or reported success), as opposed to a turn limit or error. */
  terminated: boolean;
  success: boolean;
  cumulative_reward: number;
  rewards: number[];
  num_turns: number;
  /** Turns whose answer the env judged malformed, out of the turns where it said either way. */
  format_errors: number;
  format_checked_turns: number;
  usage: { prompt_tokens: number; completion_tokens: number };
  /** The reset info, then each step's info. */
  infos: EnvInfo[];
  error?: { kind: string; message: string };
  /** World-model scores, when the env's config enables `state_reward`: `<section>_reward`, `format_correct_rate`. */
  state_reward?: Record<string, number>;
  /** The world-model judge's counters for this episode, when its `state_reward` uses a judge. */
  judge?: EpisodeJudgeCounts;
  finished_at: string;
}

/**
 * What the judge did for one episode's sections. A failed request scored its section 0
 * (`on_judge_error: score_zero`), so an episode with failures has a world-model score
 * that says nothing about the agent.
 */
export interface EpisodeJudgeCounts {
  requests: number;
  /** Requests that failed after their retries (server down, 5xx, timeout). */
  failures: number;
  /** Replies that came back but could not be read. */
  unparseable: number;
  /** The first failure's message (names the endpoint), when there was one. */
  first_error?: string;
}

/** Finish reasons of episodes that ran to a normal end; others are rerun on resume. */
export function finishedNormally(reason: FinishReason): boolean {
  return reason === "done" || reason === "success" || reason === "max_turns";
}

/**
 * Success, as VAGEN's eval decides it: the first of `success` / `is_success` / `solved`
 * in the last info; when the env reports none of them and ended the episode itself, a
 * last reward above 0.99.
 */
export function episodeSuccess(record: EpisodeRecord): boolean {
  const last = record.turns[record.turns.length - 1];
  const reported = reportedSuccess(last ? last.info : record.resetInfo);
  if (reported !== undefined) return reported;
  const terminated = record.finishReason === "done" || record.finishReason === "success";
  return terminated && last !== undefined && last.reward > 0.99;
}

/** true: malformed; false: well-formed; undefined: the env did not say. */
export function turnFormatError(turn: TurnRecord): boolean | undefined {
  const direct = turn.info.format_correct;
  const nested = turn.info.metrics?.turn_metrics?.format_correct;
  const flag = typeof direct === "boolean" ? direct : typeof nested === "boolean" ? nested : undefined;
  return flag === undefined ? undefined : !flag;
}

export interface EpisodeContext {
  envName: string;
  tag: string;
  model: string;
  maxTurns: number;
  envConfig: Record<string, unknown>;
}

export function episodeMetrics(record: EpisodeRecord, ctx: EpisodeContext, now = new Date()): EpisodeMetrics {
  const flags = record.turns.map(turnFormatError).filter((f): f is boolean => f !== undefined);
  const metrics: EpisodeMetrics = {
    env_name: ctx.envName,
    tag: ctx.tag,
    seed: record.seed,
    harness: record.harness,
    model: ctx.model,
    max_turns: ctx.maxTurns,
    env_config: ctx.envConfig,
    finish_reason: record.finishReason,
    terminated: record.finishReason === "done" || record.finishReason === "success",
    success: episodeSuccess(record),
    cumulative_reward: record.totalReward,
    rewards: record.turns.map((t) => t.reward),
    num_turns: record.turns.length,
    format_errors: flags.filter(Boolean).length,
    format_checked_turns: flags.length,
    usage: {
      prompt_tokens: record.turns.reduce((s, t) => s + t.completion.usage.promptTokens, 0),
      completion_tokens: record.turns.reduce((s, t) => s + t.completion.usage.completionTokens, 0),
    },
    infos: [record.resetInfo, ...record.turns.map((t) => t.info)],
    finished_at: now.toISOString(),
  };
  if (record.error) metrics.error = record.error;
  return metrics;
}

/** metrics.json for an episode that failed outside the harness (env creation, a harness bug). */
export function failedEpisodeMetrics(seed: number, harness: string, ctx: EpisodeContext, error: unknown, now = new Date()): EpisodeMetrics {
  return {
    env_name: ctx.envName,
    tag: ctx.tag,
    seed,
    harness,
    model: ctx.model,
    max_turns: ctx.maxTurns,
    env_config: ctx.envConfig,
    finish_reason: "error",
    terminated: false,
    success: false,
    cumulative_reward: 0,
    rewards: [],
    num_turns: 0,
    format_errors: 0,
    format_checked_turns: 0,
    usage: { prompt_tokens: 0, completion_tokens: 0 },
    infos: [],
    error: { kind: "error", message: error instanceof Error ? error.message : String(error) },
    finished_at: now.toISOString(),
  };
}
