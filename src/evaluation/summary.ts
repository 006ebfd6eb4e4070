/**
 * summary.json and the printed table. The summary is rebuilt from the metrics.json files
 * on disk for the episodes the config asks for, so a resumed or interrupted run reports
 * exactly what has finished.
 */
import { JUDGE_FAILURE_ADVICE } from "../rewards/index.ts";
import type { EpisodeMetrics } from "./episode-metrics.ts";

export interface EnvSummary {
  env_name: string;
  harness: string;
  /** Episodes with a metrics.json (finished, including ones that ended in an error). */
  episodes: number;
  /** Episodes the config asks for. */
  planned: number;
  success_rate: number;
  mean_reward: number;
  mean_turns: number;
  /** Malformed answers over all turns where the env judged the format; null if it never did. */
  format_error_rate: number | null;
  /** Episodes that ended in a model, env or other error. */
  error_episodes: number;
  /** Means of the episodes' world-model scores (`state_estimation_reward`, ...), when the env has them on. */
  state_reward?: Record<string, number>;
  /**
   * The world-model judge's counters summed over the episodes, when a judge reads their
   * sections. `failures` > 0 means some of `state_reward` is 0 for want of a judge.
   */
  judge?: JudgeTotals;
}

export interface JudgeTotals {
  requests: number;
  failures: number;
  unparseable: number;
  /** Episodes with at least one failed judge request. */
  episodes_with_failures: number;
}

export interface EvalSummary {
  created_at: string;
  model: string;
  /** True when every planned episode has finished. */
  complete: boolean;
  envs: Record<string, EnvSummary>;
}

export function summarizeEnv(envName: string, harness: string, planned: number, episodes: EpisodeMetrics[]): EnvSummary {
  const n = episodes.length;
  const mean = (f: (m: EpisodeMetrics) => number) => (n === 0 ? 0 : episodes.reduce((s, m) => s + f(m), 0) / n);
  const checked = episodes.reduce((s, m) => s + m.format_checked_turns, 0);
  const errors = episodes.reduce((s, m) => s + m.format_errors, 0);
  return {
    env_name: envName,
    harness,
    episodes: n,
    planned,
    success_rate: mean((m) => (m.success ? 1 : 0)),
    mean_reward: mean((m) => m.cumulative_reward),
    mean_turns: mean((m) => m.num_turns),
    format_error_rate: checked === 0 ? null : errors / checked,
    error_episodes: episodes.filter((m) => m.finish_reason === "model_error" || m.finish_reason === "env_error" || m.finish_reason === "error").length,
    ...stateRewardMeans(episodes),
    ...judgeTotals(episodes),
  };
}

/** The judge counters summed over the episodes that have them. */
function judgeTotals(episodes: EpisodeMetrics[]): { judge?: JudgeTotals } {
  const counted = episodes.flatMap((m) => (m.judge ? [m.judge] : []));
  if (counted.length === 0) return {};
  const sum = (f: (c: (typeof counted)[number]) => number) => counted.reduce((s, c) => s + f(c), 0);
  return {
    judge: {
      requests: sum((c) => c.requests),
      failures: sum((c) => c.failures),
      unparseable: sum((c) => c.unparseable),
      episodes_with_failures: counted.filter((c) => c.failures > 0).length,
    },
  };
}

/** Each world-model metric's mean over the episodes that report it (NaN and null left out). */
function stateRewardMeans(episodes: EpisodeMetrics[]): { state_reward?: Record<string, number> } {
  const scored = episodes.flatMap((m) => (m.state_reward ? [m.state_reward] : []));
  if (scored.length === 0) return {};
  const means: Record<string, number> = {};
  for (const key of new Set(scored.flatMap((m) => Object.keys(m)))) {
    const values = scored.map((m) => m[key]).filter((x): x is number => typeof x === "number" && !Number.isNaN(x));
    if (values.length > 0) means[key] = values.reduce((a, b) => a + b, 0) / values.length;
  }
  return { state_reward: means };
}

const COLUMNS = ["env", "episodes", "success_rate", "mean_reward", "mean_turns", "format_error_rate", "errors"] as const;

/**
 * The summary as an aligned plain-text table (one row per env). When any env's
 * world-model rewards use a judge, a `judge_failures` column shows failed over all
 * judge requests ("-" for envs without a judge).
 */
export function formatSummaryTable(summary: EvalSummary): string {
  const judged = Object.values(summary.envs).some((s) => s.judge !== undefined);
  const columns: string[] = [...COLUMNS, ...(judged ? ["judge_failures"] : [])];
  const rows: string[][] = Object.entries(summary.envs).map(([tag, s]) => [
    tag,
    s.episodes === s.planned ? String(s.episodes) : `${s.episodes}/${s.planned}`,
    s.success_rate.toFixed(3),
    s.mean_reward.toFixed(3),
    s.mean_turns.toFixed(2),
    s.format_error_rate === null ? "-" : s.format_error_rate.toFixed(3),
    String(s.error_episodes),
    ...(judged ? [s.judge ? `${s.judge.failures}/${s.judge.requests}` : "-"] : []),
  ]);
  const table = [columns, ...rows];
  const widths = columns.map((_, c) => Math.max(...table.map((r) => r[c]!.length)));
  // Left-align the tag column, right-align the numbers.
  const line = (r: string[]) => r.map((cell, c) => (c === 0 ? cell.padEnd(widths[c]!) : cell.padStart(widths[c]!))).join("  ");
  return `${table.map(line).join("\n")}\n`;
}

/**
 * Lines to print under the table about results that are not what they seem: one per
 * env whose judge failed, since those world-model scores are 0 for want of a judge.
 */
export function summaryWarnings(summary: EvalSummary): string[] {
  return Object.entries(summary.envs).flatMap(([tag, s]) => {
    if (!s.judge || s.judge.failures === 0) return [];
    const { failures, requests, episodes_with_failures: episodes } = s.judge;
    return [`warning: ${tag}: world-model judge failed ${failures} of ${requests} request(s) in ${episodes} episode(s); ${JUDGE_FAILURE_ADVICE}`];
  });
}
