/**
 * A step's batch between the phases: the rows from the rollout plus one owned [B, R]
 * tensor per column, R the widest response. The rollout gives the columns the rows carry
 * (response mask, token scores, the engine's log-probs); each later phase adds one (old
 * and reference log-probs, values, rewards, advantages, returns, the rollout-correction
 * weights and loss mask).
 *
 *   rows:      TrainingRow[B]
 *   columns:   [B, R] float32 (turnIds int64, -1 outside turns), on the model's device;
 *              row b's entries past its response length are padding (0, or -1 for turnIds)
 *
 * `select(keep)` is the filter and the mini- and micro-batch cut: a new batch of those
 * rows, its width narrowed to their widest response; `tokenCount` / `rowCount` are what
 * a loss over that batch is normalised by (counted before a mini-batch is split).
 */
import * as torch from "../torch/index.ts";
import type { Tensor } from "../torch/index.ts";
import type { TrainingRow } from "../rollout/types.ts";
import { rowsTensor } from "./forward.ts";

export type ColumnName =
  | "responseMask"
  | "tokenScores"
  | "rolloutLogprobs"
  | "oldLogprobs"
  | "refLogprobs"
  | "values"
  | "tokenRewards"
  | "advantages"
  | "returns"
  | "valueMask"
  | "turnIds"
  | "isWeights"
  | "lossMask";

/** Longest response of the rows (at least 1). */
export function responseWidth(rows: readonly TrainingRow[]): number {
  return Math.max(1, ...rows.map((r) => r.responseIds.length));
}

/** "cuda" and "cuda:0" are one device; "cpu" is "cpu". */
function sameDevice(a: string, b: string): boolean {
  const norm = (d: string) => (d.includes(":") ? d : d === "cpu" ? d : `${d}:0`);
  return norm(a) === norm(b);
}

export class StepBatch implements Disposable {
  readonly #columns = new Map<ColumnName, Tensor>();

  private constructor(
    readonly rows: readonly TrainingRow[],
    readonly width: number,
    readonly device: string,
  ) {}

  /** The rows with the columns they carry: responseMask, tokenScores (the env's rewards), rolloutLogprobs. */
  static fromRows(rows: readonly TrainingRow[], device: string): StepBatch {
    const batch = new StepBatch(rows, responseWidth(rows), device);
    batch.set("responseMask", batch.tensorOf(rows.map((r) => r.responseMask)));
    batch.set("tokenScores", batch.tensorOf(rows.map((r) => r.tokenRewards)));
    batch.set("rolloutLogprobs", batch.tensorOf(rows.map((r) => r.rolloutLogprobs)));
    return batch;
  }

  get size(): number {
    return this.rows.length;
  }

  has(name: ColumnName): boolean {
    return this.#columns.has(name);
  }

  /** The column (owned by the batch: do not dispose it). */
  get(name: ColumnName): Tensor {
    const t = this.#columns.get(name);
    if (t === undefined) throw new Error(`StepBatch: no "${name}" column yet (columns: ${[...this.#columns.keys()].join(", ")})`);
    return t;
  }

  /** The column if the batch has it. */
  maybe(name: ColumnName): Tensor | undefined {
    return this.#columns.get(name);
  }

  /**
   * Adds (or replaces) a column; the batch takes ownership. t: [B, R], on the batch's
   * device. A tensor the batch already holds under another name (an estimator may return
   * its advantages as its returns) is stored as a copy, so each column owns its own.
   */
  set(name: ColumnName, t: Tensor): void {
    const [b, r] = t.shape;
    if (t.shape.length !== 2 || b !== this.size || r !== this.width) {
      throw new Error(`StepBatch column "${name}": expected shape [${this.size}, ${this.width}], got [${t.shape.join(", ")}]`);
    }
    if (!sameDevice(t.device, this.device)) throw new Error(`StepBatch column "${name}": on ${t.device}, expected the batch's device ${this.device}`);
    const old = this.#columns.get(name);
    if (old === t) return;
    const owned = [...this.#columns].some(([other, held]) => other !== name && held === t) ? t.clone() : t;
    old?.dispose();
    this.#columns.set(name, owned);
  }

  /** Host columns (one array per row, any length up to the width) as a [B, R] tensor on the batch's device. */
  tensorOf(columns: readonly ArrayLike<number>[], opts: { dtype?: "f32" | "i64"; fill?: number } = {}): Tensor {
    return rowsTensor(columns, this.width, { ...opts, device: this.device });
  }

  /** A column as host arrays, each row cut to its response length (dumps, metrics over rows). */
  hostRows(name: ColumnName): Float32Array[] {
    const flat = torch.tidy(() => this.get(name).to({ dtype: "f32", device: "cpu" }).contiguous().toFloat32Array());
    return this.rows.map((r, b) => flat.slice(b * this.width, b * this.width + r.responseIds.length));
  }

  /** Per row, the sum of a column over its response (e.g. a row's score). */
  rowSums(name: ColumnName): number[] {
    return Array.from(torch.tidy(() => this.get(name).to({ dtype: "f64" }).sum(-1).to({ device: "cpu" }).toFloat64Array()));
  }

  /**
   * The rows at `indices` (in that order) with every column, narrowed to their widest
   * response: the filter's kept rows, or one mini- or micro-batch.
   */
  select(indices: readonly number[]): StepBatch {
    const rows = indices.map((i) => {
      const row = this.rows[i];
      if (row === undefined) throw new Error(`StepBatch.select: row ${i} of ${this.size}`);
      return row;
    });
    const out = new StepBatch(rows, responseWidth(rows), this.device);
    const index = torch.tensor(Int32Array.from(indices), [indices.length], { dtype: "i64", device: this.device as never });
    try {
      for (const [name, t] of this.#columns) out.#columns.set(name, torch.tidy(() => t.indexSelect(0, index).narrow(1, 0, out.width).contiguous()));
    } finally {
      index.dispose();
    }
    return out;
  }

  /** Masked tokens of a 0/1 column (default the loss mask, else the response mask). */
  tokenCount(mask: ColumnName = this.has("lossMask") ? "lossMask" : "responseMask"): number {
    return torch.tidy(() => this.get(mask).ne(0).to({ dtype: "f64" }).sum().item());
  }

  /** Rows with at least one masked token of a 0/1 column (default as tokenCount). */
  rowCount(mask: ColumnName = this.has("lossMask") ? "lossMask" : "responseMask"): number {
    return torch.tidy(() => this.get(mask).ne(0).any(-1).to({ dtype: "f64" }).sum().item());
  }

  dispose(): void {
    for (const t of this.#columns.values()) t.dispose();
    this.#columns.clear();
  }

  [Symbol.dispose](): void {
    this.dispose();
  }
}
