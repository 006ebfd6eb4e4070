/**
 * Rows into one padded batch for a differentiable forward pass (verl's layout): each
 * row's prompt left-padded to the widest prompt P, its response right-padded to the
 * widest response R, so response token j of every row sits at column P + j and is
 * predicted by the hidden state at column P + j - 1. The family adds what its forward
 * needs beyond ids and mask (Qwen2.5-VL: pixel values, patch grids, M-RoPE positions).
 */
import * as torch from "../torch/index.ts";
import type { Device, Tensor } from "../torch/index.ts";
import { VagenError } from "../core/errors.ts";
import type { RowBatch, RowImage, TrainingRow } from "./types.ts";

/** The padded rows as host arrays, with each row's images at their padded offsets. */
export interface PaddedRows {
  /** [B][P + R] ids, the pad id at padding. */
  inputIds: number[][];
  /** [B][P + R] 1 at real tokens. */
  attentionMask: number[][];
  /** Per row, its images in sequence order, offsets into the padded row. */
  images: RowImage[][];
  promptWidth: number;
  responseWidth: number;
}

/** What a model family adds to a row batch. */
export interface RowBatchFamily {
  readonly padTokenId: number;
  readonly device: Device;
  /** The family's own forward inputs for the padded rows (tensors the batch then owns). */
  modelInputs(padded: PaddedRows): Record<string, unknown>;
}

export function padRows(rows: readonly TrainingRow[], padTokenId: number): PaddedRows {
  if (rows.length === 0) throw new VagenError("batchRows: no rows to batch");
  const P = Math.max(1, ...rows.map((r) => r.promptIds.length));
  const R = Math.max(1, ...rows.map((r) => r.responseIds.length));
  const fill = (n: number, value: number) => new Array<number>(n).fill(value);
  const inputIds: number[][] = [];
  const attentionMask: number[][] = [];
  const images: RowImage[][] = [];
  rows.forEach((row, b) => {
    checkRow(row, b);
    const lead = P - row.promptIds.length;
    const tail = R - row.responseIds.length;
    const real = row.promptIds.length + row.responseIds.length;
    inputIds.push([...fill(lead, padTokenId), ...row.promptIds, ...row.responseIds, ...fill(tail, padTokenId)]);
    attentionMask.push([...fill(lead, 0), ...fill(real, 1), ...fill(tail, 0)]);
    images.push(row.images.map((img) => ({ ...img, offset: img.offset + lead })));
  });
  return { inputIds, attentionMask, images, promptWidth: P, responseWidth: R };
}

export function batchRows(rows: readonly TrainingRow[], family: RowBatchFamily): RowBatch {
  const padded = padRows(rows, family.padTokenId);
  const { promptWidth: P, responseWidth: R } = padded;
  const device = family.device;
  const matrix = (columns: readonly (readonly number[])[], width: number, dtype: "i64" | "f32"): Tensor => {
    const flat = new Float64Array(columns.length * width);
    columns.forEach((col, b) => flat.set(col, b * width));
    return torch.tensor(flat, [columns.length, width], { dtype, device });
  };
  const padResponse = (values: readonly number[]) => [...values, ...new Array<number>(R - values.length).fill(0)];
  const tensors: Tensor[] = [];
  const own = <T extends Tensor>(t: T): T => {
    tensors.push(t);
    return t;
  };
  try {
    const modelInputs = family.modelInputs(padded);
    for (const value of Object.values(modelInputs)) if (value instanceof torch.Tensor) tensors.push(value);
    return {
      inputIds: own(matrix(padded.inputIds, P + R, "i64")),
      attentionMask: own(matrix(padded.attentionMask, P + R, "i64")),
      responseMask: own(matrix(rows.map((r) => padResponse(r.responseMask)), R, "f32")),
      tokenRewards: own(matrix(rows.map((r) => padResponse(r.tokenRewards)), R, "f32")),
      rolloutLogprobs: own(matrix(rows.map((r) => padResponse(r.rolloutLogprobs)), R, "f32")),
      promptWidth: P,
      responseWidth: R,
      modelInputs,
      rows,
      dispose: () => {
        for (const t of tensors.splice(0)) t.dispose();
      },
    };
  } catch (err) {
    for (const t of tensors) t.dispose();
    throw err;
  }
}

function checkRow(row: TrainingRow, b: number): void {
  const R = row.responseIds.length;
  for (const [name, column] of [["responseMask", row.responseMask], ["tokenRewards", row.tokenRewards], ["rolloutLogprobs", row.rolloutLogprobs]] as const) {
    if (column.length !== R) throw new VagenError(`batchRows: row ${b} (episode ${row.episodeId}) has ${R} response ids but ${column.length} ${name} values`);
  }
}
