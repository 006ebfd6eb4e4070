/**
 * VAGEN's group filters (reward_variance, reward_variance_top_p): after advantages are
 * computed, keep the groups whose sample rewards vary the most. A group whose samples all
 * got the same reward has zero advantage everywhere under GRPO, so it costs a backward
 * pass and teaches nothing.
 *
 * Groups are keyed by group id (VAGEN's group_idx, else uid); a sample's reward is its
 * row's Σ token_level_scores (see rowRewards). Group variance is the population variance
 * by default (ddof 0); a one-sample group has variance 0. Ties keep the order in which
 * groups first appear. The filters return which rows to keep (ascending) and, for top_p,
 * the factor the caller multiplies the kept rows' advantages by.
 */
import * as torch from "../torch/index.ts";
import type { Tensor } from "../torch/index.ts";
import { rowsAndTokens } from "./aggregate.ts";

export interface FilterResult {
  /** Row indices to keep, ascending. */
  keepRows: number[];
  /** Multiply the kept rows' advantages by this (1 for reward_variance). */
  lossScale: number;
  /** filter/train/... metrics under VAGEN's names. */
  metrics: Record<string, number>;
}

export interface GroupedRewards {
  /** Sample reward of each row. */
  rewards: ArrayLike<number>;
  /** Group key of each row. */
  groupIds: readonly (string | number)[];
}

/** Σ over tokens of token_level_scores [B, T] -> one reward per row. */
export function rowRewards(tokenLevelScores: Tensor): Float64Array {
  rowsAndTokens(tokenLevelScores, "rowRewards tokenLevelScores");
  return torch.tidy(() => tokenLevelScores.to({ dtype: "f64" }).sum(-1).toFloat64Array());
}

interface Group {
  rows: number[];
  variance: number;
}

function groupVariances({ rewards, groupIds }: GroupedRewards, ddof: number): Group[] {
  if (rewards.length !== groupIds.length) {
    throw new Error(`filter: ${rewards.length} rewards but ${groupIds.length} group ids; expected one group id per row`);
  }
  const byKey = new Map<string, { rows: number[]; values: number[] }>();
  for (let i = 0; i < rewards.length; i++) {
    const key = String(groupIds[i]);
    let g = byKey.get(key);
    if (g === undefined) byKey.set(key, (g = { rows: [], values: [] }));
    g.rows.push(i);
    g.values.push(rewards[i]!);
  }
  return [...byKey.values()].map(({ rows, values }) => {
    if (values.length <= 1) return { rows, variance: 0 };
    const mean = values.reduce((a, b) => a + b, 0) / values.length;
    const squares = values.reduce((a, b) => a + (b - mean) ** 2, 0);
    return { rows, variance: squares / (values.length - ddof) };
  });
}

/** Groups by variance, largest first; a stable sort keeps first-appearance order on ties. */
function byVarianceDescending(groups: Group[]): Group[] {
  return groups.map((g, i) => ({ g, i })).sort((a, b) => b.g.variance - a.g.variance || a.i - b.i).map((e) => e.g);
}

function summary(prefix: string, variances: number[]): Record<string, number> {
  return {
    [`${prefix}/mean_variance`]: variances.length ? variances.reduce((a, b) => a + b, 0) / variances.length : 0,
    [`${prefix}/min_variance`]: variances.length ? Math.min(...variances) : 0,
    [`${prefix}/max_variance`]: variances.length ? Math.max(...variances) : 0,
  };
}

function keptRows(groups: Group[]): number[] {
  return groups.flatMap((g) => g.rows).sort((a, b) => a - b);
}

/**
 * reward_variance: keep the top ⌈G·topk⌉ groups by variance (at least 1), every row of them.
 * Options: topk (default 0.2), ddof (default 0).
 */
export function rewardVarianceFilter(input: GroupedRewards, opts: { topk?: number; ddof?: number } = {}): FilterResult {
  const topk = opts.topk ?? 0.2;
  if (!(topk > 0 && topk <= 1)) throw new Error(`filter_kwargs.topk: expected a number in (0, 1], got ${topk}`);
  const groups = groupVariances(input, opts.ddof ?? 0);
  const kept = byVarianceDescending(groups).slice(0, Math.max(1, Math.ceil(groups.length * topk)));
  const keepRows = keptRows(kept);
  return {
    keepRows,
    lossScale: 1,
    metrics: {
      ...summary("filter/train/topk", kept.map((g) => g.variance)),
      ...summary("filter/train/original", groups.map((g) => g.variance)),
      "filter/train/original/batch_size": input.rewards.length,
    },
  };
}

/**
 * reward_variance_top_p: walk the groups by variance, largest first, adding each while the
 * running sum is below top_p × total (the check comes before adding, so the group that
 * crosses the threshold is kept); at least one group. The kept rows' advantages are
 * scaled by √(kept groups / groups), since fewer groups means a smaller effective batch.
 * With no variance at all every row is kept, scale 1, and no metrics are reported.
 * Options: top_p (default 0.9), ddof (default 0).
 */
export function rewardVarianceTopPFilter(input: GroupedRewards, opts: { topP?: number; ddof?: number } = {}): FilterResult {
  const topP = opts.topP ?? 0.9;
  if (!(topP > 0 && topP <= 1)) throw new Error(`filter_kwargs.top_p: expected a number in (0, 1], got ${topP}`);
  const groups = groupVariances(input, opts.ddof ?? 0);
  const total = groups.reduce((a, g) => a + g.variance, 0);
  if (!(total > 0)) return { keepRows: Array.from({ length: input.rewards.length }, (_, i) => i), lossScale: 1, metrics: {} };
  const kept: Group[] = [];
  let cumulative = 0;
  for (const g of byVarianceDescending(groups)) {
    if (cumulative >= topP * total) break;
    kept.push(g);
    cumulative += g.variance;
  }
  const lossScale = Math.sqrt(kept.length / groups.length);
  const keepRows = keptRows(kept);
  return {
    keepRows,
    lossScale,
    metrics: {
      ...summary("filter/train/top_p", kept.map((g) => g.variance)),
      "filter/train/top_p/cumulative_variance_ratio": cumulative / total,
      "filter/train/top_p/num_selected_groups": kept.length,
      "filter/train/top_p/num_total_groups": groups.length,
      "filter/train/top_p/loss_scale": lossScale,
      ...summary("filter/train/original", groups.map((g) => g.variance)),
      "filter/train/original/batch_size": input.rewards.length,
      "filter/train/filtered/batch_size": keepRows.length,
    },
  };
}
