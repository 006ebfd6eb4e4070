/**
 * A step's per-row data between the phases: the rows from the rollout plus one host
 * array per row for every column the phases add (old log-probs, values, advantages...),
 * and the conversions to and from the [B, R] tensors the algorithms work on.
 */
import * as torch from "../torch/index.ts";
import type { Tensor } from "../torch/index.ts";
import type { AdvantageBatch } from "../algorithms/index.ts";
import type { TrainingRow } from "../rollout/types.ts";
import { rowsTensor } from "./forward.ts";

/** Longest response of the rows (at least 1). */
export function responseWidth(rows: readonly TrainingRow[]): number {
  return Math.max(1, ...rows.map((r) => r.responseIds.length));
}

/** [B, R] tensor -> one array per row, cut to the row's response length. */
export function splitRows(t: Tensor, rows: readonly TrainingRow[]): Float32Array[] {
  const width = t.shape[1]!;
  const flat = torch.tidy(() => t.to({ dtype: "f32", device: "cpu" }).contiguous().toFloat32Array());
  return rows.map((r, b) => flat.slice(b * width, b * width + r.responseIds.length));
}

/** The estimator's input for the rows: rewards, mask, values and the identity columns. */
export function advantageBatch(rows: readonly TrainingRow[], tokenRewards: readonly ArrayLike<number>[], values: readonly ArrayLike<number>[] | undefined, device: string): AdvantageBatch {
  const R = responseWidth(rows);
  return {
    tokenLevelRewards: rowsTensor(tokenRewards, R, { device }),
    responseMask: rowsTensor(rows.map((r) => r.responseMask), R, { device }),
    values: values ? rowsTensor(values, R, { device }) : undefined,
    groupIds: rows.map((r) => r.uid),
    episodeIds: rows.map((r) => r.episodeId),
    trajIndex: rows.map((r) => r.trajIndex),
    turnIndex: rows.map((r) => r.turnIndex),
    stateKeys: rows.some((r) => r.stateKeys) ? rows.map((r) => r.stateKeys ?? []) : undefined,
  };
}

/** Masked statistics of per-row columns, over the rows' mask-1 tokens. */
export function maskedStats(rows: readonly TrainingRow[], column: readonly ArrayLike<number>[], mask: (row: TrainingRow, j: number) => boolean = (r, j) => r.responseMask[j] === 1): { mean: number; max: number; min: number } {
  let sum = 0;
  let n = 0;
  let max = -Infinity;
  let min = Infinity;
  rows.forEach((row, b) => {
    const col = column[b]!;
    for (let j = 0; j < row.responseIds.length; j++) {
      if (!mask(row, j)) continue;
      const v = col[j]!;
      sum += v;
      n++;
      if (v > max) max = v;
      if (v < min) min = v;
    }
  });
  return n === 0 ? { mean: 0, max: 0, min: 0 } : { mean: sum / n, max, min };
}

/** mean/max/min of plain numbers under a metric prefix. */
export function summarize(prefix: string, values: readonly number[]): Record<string, number> {
  if (values.length === 0) return { [`${prefix}/mean`]: 0, [`${prefix}/max`]: 0, [`${prefix}/min`]: 0 };
  return {
    [`${prefix}/mean`]: values.reduce((a, b) => a + b, 0) / values.length,
    [`${prefix}/max`]: Math.max(...values),
    [`${prefix}/min`]: Math.min(...values),
  };
}

/**
 * A degenerate response: nothing sampled but the end token, or one character repeated
 * over most of it (a collapsing policy's first symptom).
 */
export function isDegenerate(text: string): boolean {
  const t = text.trim();
  if (t.length === 0) return true;
  if (t.length < 8) return false;
  const counts = new Map<string, number>();
  for (const ch of t) counts.set(ch, (counts.get(ch) ?? 0) + 1);
  return Math.max(...counts.values()) / t.length > 0.8;
}
