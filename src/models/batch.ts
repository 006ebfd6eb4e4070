/**
 * Host-side pieces of a padded batch of token rows, shared by the families' training
 * forwards: ids as an int64 tensor, and the positions a text-only row's tokens take.
 */
import * as torch from "../torch/index.ts";
import type { Device, Tensor } from "../torch/index.ts";

/** (B, T) host ids -> int64 tensor; every row must have the same length. */
export function idsTensor(rows: readonly (readonly number[])[], device: Device): Tensor {
  const B = rows.length;
  const T = rows[0]?.length ?? 0;
  const flat = new Float64Array(B * T);
  rows.forEach((row, b) => {
    if (row.length !== T) throw new Error(`row ${b} has ${row.length} ids, row 0 has ${T}: pad the batch first`);
    flat.set(row, b * T);
  });
  return torch.tensor(flat, [B, T], { dtype: "i64", device });
}

/**
 * Rotary positions of a padded batch of text rows, [B][T]: each row counts its real tokens
 * from 0 (cumsum(mask) - 1, as transformers' generate and verl compute them), so a row's
 * first real token is at 0 however much left padding it has, as in the engine, which
 * never sees padding. Padding takes 0 (its outputs are masked out). Without a mask every
 * row is 0..T-1.
 */
export function textPositions(T: number, attentionMask: readonly (readonly number[])[] | undefined, B: number): number[][] {
  return Array.from({ length: B }, (_, b) => {
    const mask = attentionMask?.[b];
    let seen = 0;
    return Array.from({ length: T }, (_, t) => (!mask ? t : mask[t] ? seen++ : 0));
  });
}
