/**
 * From training rows back to episodes (VAGEN main's TrajectoryView and packing).
 *
 * Rows are identified by (episode, conversation ordinal): the episode is `episodeIds[b]`
 * when given, else (group, trajIndex), else the row alone (concat with no ids). Rows that
 * share a key are padding duplicates: the first is kept, later ones receive its results,
 * and duplicates whose response masks differ are refused. An episode's unique rows,
 * ordered by conversation ordinal, form one trajectory.
 *
 * Packing lists a trajectory's model tokens (mask 1) only, row after row, so observations
 * and template tokens between turns vanish and the recursions run straight through them.
 * Turns come from the mask (VAGEN main's rule): a packed token ends a turn when the next
 * packed token is not the next position of the same row (a mask-0 gap or a row change),
 * or when it is the trajectory's last token. So under concat a turn is one maximal run of
 * mask-1 tokens, under no_concat a row is a turn, and a compact summary is its own turn.
 *
 * Everything here is host bookkeeping over the mask and the id columns, done once per
 * batch; the tensor helpers below move values between the [B, T] row layout, the packed
 * [N, L] token layout (N trajectories, L the longest) and the [N, K] turn layout (K the
 * most turns), always by gathering from a flat copy with one trailing zero, so padding
 * reads 0.
 */
import * as torch from "../torch/index.ts";
import type { Tensor } from "../torch/index.ts";

/** The identity columns a layout is built from (a subset of AdvantageBatch). */
export interface RowIdentity {
  /** [B, T] 1 at model tokens. */
  responseMask: Tensor;
  /** [B] group uid. */
  groupIds: readonly string[];
  /** [B] episode id. */
  episodeIds?: readonly string[];
  /** [B] rollout index within the group. */
  trajIndex?: readonly number[];
  /** [B] conversation ordinal within the episode. */
  turnIndex?: readonly number[];
}

export interface Trajectory {
  /** Group uid of the trajectory's first row. */
  group: string;
  /** Unique rows in conversation order. */
  rows: number[];
  /** Number of model tokens. */
  length: number;
  /** Number of turns. */
  turns: number;
}

export interface TrajectoryLayout {
  /** B and T of the row layout. */
  rows: number;
  width: number;
  trajectories: Trajectory[];
  /** L: the longest trajectory in model tokens (at least 1). */
  maxLength: number;
  /** K: the most turns of any trajectory (at least 1). */
  maxTurns: number;
  /** [B] the unique row each row copies (itself when unique). */
  sourceRow: Int32Array;
  /** [N * L] flat [B * T] position of each packed token; B * T (the trailing zero) for padding. */
  packIndex: Int32Array;
  /** [B * T] flat packed position each row position reads; N * L (the trailing zero) off the model tokens. */
  unpackIndex: Int32Array;
  /** [N * L] 1 at packed tokens. */
  valid: Uint8Array;
  /** [N * L] 1 at the last token of a turn. */
  boundary: Uint8Array;
  /** [N * L] 1 at the first token of a turn. */
  turnStart: Uint8Array;
  /** [N * L] 1 at the trajectory's last token. */
  last: Uint8Array;
  /** [N * L] turn slot n * K + t of each packed token; N * K for padding. */
  tokenTurn: Int32Array;
  /** [N * L] turn ordinal t within the trajectory; -1 for padding. */
  tokenTurnOrdinal: Int32Array;
  /** [N * K] packed position of each turn's first / last token; N * L when the turn does not exist. */
  turnFirst: Int32Array;
  turnLast: Int32Array;
  /** [N * K] the row holding the turn and the turn's ordinal within that row; -1 when the turn does not exist. */
  turnRow: Int32Array;
  turnInRow: Int32Array;
}

/** Builds the layout; reads the response mask to the host once. */
export function stitchTrajectories(batch: RowIdentity): TrajectoryLayout {
  const [rows, width] = shape2d(batch.responseMask, "responseMask");
  checkColumn(batch.groupIds, rows, "groupIds");
  checkColumn(batch.episodeIds, rows, "episodeIds");
  checkColumn(batch.trajIndex, rows, "trajIndex");
  checkColumn(batch.turnIndex, rows, "turnIndex");
  const mask = batch.responseMask.toFloat64Array();

  // Deduplicate rows by (episode, ordinal) and collect each episode's unique rows.
  const sourceRow = new Int32Array(rows);
  const firstRowOfKey = new Map<string, number>();
  const episodes = new Map<string, number[]>();
  for (let b = 0; b < rows; b++) {
    const episode = episodeKey(batch, b);
    const key = `${episode}\u0001${batch.turnIndex?.[b] ?? 0}`;
    const first = firstRowOfKey.get(key);
    if (first !== undefined) {
      if (!sameRow(mask, width, first, b)) {
        throw new Error(`rows ${first} and ${b} share episode "${episode}" and turn ${batch.turnIndex?.[b] ?? 0} but their response masks differ; expected padding duplicates to be exact copies`);
      }
      sourceRow[b] = first;
      continue;
    }
    firstRowOfKey.set(key, b);
    sourceRow[b] = b;
    const list = episodes.get(episode);
    if (list) list.push(b);
    else episodes.set(episode, [b]);
  }

  // Each trajectory's model tokens, in conversation order.
  const trajectories: Trajectory[] = [];
  const tokensOf: number[][] = [];
  for (const episodeRows of episodes.values()) {
    episodeRows.sort((a, b) => (batch.turnIndex?.[a] ?? 0) - (batch.turnIndex?.[b] ?? 0));
    const tokens: number[] = [];
    for (const b of episodeRows) for (let p = 0; p < width; p++) if (mask[b * width + p] !== 0) tokens.push(b * width + p);
    trajectories.push({ group: batch.groupIds[episodeRows[0]!]!, rows: episodeRows, length: tokens.length, turns: 0 });
    tokensOf.push(tokens);
  }
  const count = trajectories.length;
  const maxLength = Math.max(1, ...tokensOf.map((t) => t.length));

  const packIndex = new Int32Array(count * maxLength).fill(rows * width);
  const valid = new Uint8Array(count * maxLength);
  const boundary = new Uint8Array(count * maxLength);
  const turnStart = new Uint8Array(count * maxLength);
  const last = new Uint8Array(count * maxLength);
  const tokenTurnOrdinal = new Int32Array(count * maxLength).fill(-1);
  for (let n = 0; n < count; n++) {
    const tokens = tokensOf[n]!;
    let turn = 0;
    for (let j = 0; j < tokens.length; j++) {
      const at = n * maxLength + j;
      const position = tokens[j]!;
      const next = tokens[j + 1];
      packIndex[at] = position;
      valid[at] = 1;
      tokenTurnOrdinal[at] = turn;
      if (j === 0 || boundary[at - 1] === 1) turnStart[at] = 1;
      // A gap in positions (an observation) or a new row ends the turn, as does the end.
      const endsTurn = next === undefined || next !== position + 1 || Math.floor(next / width) !== Math.floor(position / width);
      if (endsTurn) {
        boundary[at] = 1;
        turn++;
      }
      if (next === undefined) last[at] = 1;
    }
    trajectories[n]!.turns = turn;
  }
  const maxTurns = Math.max(1, ...trajectories.map((t) => t.turns));

  const tokenTurn = new Int32Array(count * maxLength).fill(count * maxTurns);
  const turnFirst = new Int32Array(count * maxTurns).fill(count * maxLength);
  const turnLast = new Int32Array(count * maxTurns).fill(count * maxLength);
  const turnRow = new Int32Array(count * maxTurns).fill(-1);
  const turnInRow = new Int32Array(count * maxTurns).fill(-1);
  for (let n = 0; n < count; n++) {
    let previousRow = -1;
    let ordinalInRow = 0;
    for (let j = 0; j < trajectories[n]!.length; j++) {
      const at = n * maxLength + j;
      const slot = n * maxTurns + tokenTurnOrdinal[at]!;
      tokenTurn[at] = slot;
      if (turnStart[at]) {
        const row = Math.floor(packIndex[at]! / width);
        ordinalInRow = row === previousRow ? ordinalInRow + 1 : 0;
        previousRow = row;
        turnFirst[slot] = at;
        turnRow[slot] = row;
        turnInRow[slot] = ordinalInRow;
      }
      if (boundary[at]) turnLast[slot] = at;
    }
  }

  const unpackIndex = new Int32Array(rows * width).fill(count * maxLength);
  const packedAt = new Map<number, number>();
  for (let at = 0; at < packIndex.length; at++) if (valid[at]) packedAt.set(packIndex[at]!, at);
  for (let b = 0; b < rows; b++) {
    const source = sourceRow[b]!;
    for (let p = 0; p < width; p++) {
      const at = packedAt.get(source * width + p);
      if (at !== undefined) unpackIndex[b * width + p] = at;
    }
  }

  return {
    rows, width, trajectories, maxLength, maxTurns, sourceRow, packIndex, unpackIndex, valid, boundary, turnStart, last,
    tokenTurn, tokenTurnOrdinal, turnFirst, turnLast, turnRow, turnInRow,
  };
}

// ---- tensor helpers -------------------------------------------------------------------

/** [B, T] -> [N, L]: each trajectory's model tokens, zero-padded on the right. */
export function packTokens(layout: TrajectoryLayout, x: Tensor): Tensor {
  return gatherWithZero(x, layout.packIndex, [layout.trajectories.length, layout.maxLength]);
}

/** [N, L] -> [B, T]: back to every row (duplicates included); 0 off the model tokens. */
export function unpackTokens(layout: TrajectoryLayout, packed: Tensor): Tensor {
  return gatherWithZero(packed, layout.unpackIndex, [layout.rows, layout.width]);
}

/** [N, L] -> [N, K]: the sum of each turn's tokens. */
export function sumPerTurn(layout: TrajectoryLayout, packed: Tensor): Tensor {
  const slots = layout.trajectories.length * layout.maxTurns;
  const index = indexTensor(layout.tokenTurn, packed.device);
  const sums = torch.zeros([slots + 1], { dtype: packed.dtype, device: packed.device }).indexAdd(0, index, packed.reshape(-1));
  return sums.narrow(0, 0, slots).view(layout.trajectories.length, layout.maxTurns);
}

/** [N, L] -> [N, K]: the value at each turn's first token (0 for missing turns). */
export function atTurnFirst(layout: TrajectoryLayout, packed: Tensor): Tensor {
  return gatherWithZero(packed, layout.turnFirst, [layout.trajectories.length, layout.maxTurns]);
}

/** [N, L] -> [N, K]: the value at each turn's last token (0 for missing turns). */
export function atTurnLast(layout: TrajectoryLayout, packed: Tensor): Tensor {
  return gatherWithZero(packed, layout.turnLast, [layout.trajectories.length, layout.maxTurns]);
}

/** [N, K] -> [N, L]: every token gets its turn's value. */
export function spreadTurns(layout: TrajectoryLayout, perTurn: Tensor): Tensor {
  return gatherWithZero(perTurn, layout.tokenTurn, [layout.trajectories.length, layout.maxLength]);
}

/** [N, L] 0/1 tensor of one of the layout's token flags, in `like`'s dtype and device. */
export function tokenFlag(layout: TrajectoryLayout, flag: "valid" | "boundary" | "turnStart" | "last", like: Tensor): Tensor {
  return torch.tensor(layout[flag], [layout.trajectories.length, layout.maxLength], { dtype: like.dtype, device: like.device });
}

/** [N, K] 0/1: the turn exists. */
export function turnExists(layout: TrajectoryLayout, like: Tensor): Tensor {
  const exists = new Uint8Array(layout.turnRow.length);
  for (let i = 0; i < exists.length; i++) exists[i] = layout.turnRow[i]! >= 0 ? 1 : 0;
  return torch.tensor(exists, [layout.trajectories.length, layout.maxTurns], { dtype: like.dtype, device: like.device });
}

/** [B, T] int64: the turn ordinal of each model token within its trajectory, -1 elsewhere. */
export function turnIdTensor(layout: TrajectoryLayout, device: torch.Device): Tensor {
  const ids = new Int32Array(layout.rows * layout.width).fill(-1);
  for (let i = 0; i < ids.length; i++) {
    const at = layout.unpackIndex[i]!;
    if (at < layout.tokenTurnOrdinal.length) ids[i] = layout.tokenTurnOrdinal[at]!;
  }
  return torch.tensor(ids, [layout.rows, layout.width], { dtype: "i64", device });
}

/** [B, 1] 1 for unique rows, 0 for padding duplicates: whitening statistics count each row once. */
export function uniqueRowWeight(layout: TrajectoryLayout, like: Tensor): Tensor {
  const weight = new Uint8Array(layout.rows);
  for (let b = 0; b < layout.rows; b++) weight[b] = layout.sourceRow[b] === b ? 1 : 0;
  return torch.tensor(weight, [layout.rows, 1], { dtype: like.dtype, device: like.device });
}

/** Reads x.reshape(-1) followed by one zero at `index` and shapes the result. */
export function gatherWithZero(x: Tensor, index: Int32Array, outShape: number[]): Tensor {
  const zero = torch.zeros([1], { dtype: x.dtype, device: x.device });
  const flat = torch.cat([x.reshape(-1), zero]);
  return flat.indexSelect(0, indexTensor(index, x.device)).view(outShape);
}

/** An int64 index tensor on `device`. */
export function indexTensor(index: Int32Array | readonly number[], device: torch.Device): Tensor {
  const data = index instanceof Int32Array ? index : Int32Array.from(index);
  return torch.tensor(data, [data.length], { dtype: "i64", device });
}

/** [B, T] checked. */
export function shape2d(t: Tensor, name: string): [number, number] {
  const shape = t.size();
  if (shape.length !== 2) throw new Error(`${name}: expected a [B, T] tensor, got shape [${shape.join(", ")}]`);
  return [shape[0]!, shape[1]!];
}

function checkColumn(column: readonly unknown[] | undefined, rows: number, name: string): void {
  if (column !== undefined && column.length !== rows) {
    throw new Error(`${name}: expected one entry per row (${rows}), got ${column.length}`);
  }
}

function episodeKey(batch: RowIdentity, b: number): string {
  if (batch.episodeIds) return `e\u0000${batch.episodeIds[b]}`;
  if (batch.trajIndex) return `g\u0000${batch.groupIds[b]}\u0000${batch.trajIndex[b]}`;
  return `r\u0000${b}`;
}

function sameRow(mask: Float64Array, width: number, a: number, b: number): boolean {
  for (let p = 0; p < width; p++) if ((mask[a * width + p] !== 0) !== (mask[b * width + p] !== 0)) return false;
  return true;
}
