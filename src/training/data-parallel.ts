/**
 * Data parallel training over a process group (one process per GPU, or per CPU rank with
 * Gloo), so that a run on N ranks trains what one process would on the same global batch:
 *
 *   rollout   rank r plays the items i with i mod N = r (groups stay whole: all n
 *             rollouts of an item on one rank), with the episode ids and sampling seeds
 *             of the whole batch's positions
 *   forward   each rank computes old/ref log-probs and values of the rows it played
 *   exchange  every rank sends every other the per-row data the estimators read
 *             (ids, masks, scores, log-probs, values; no images, no prompts' pixels),
 *             so all ranks hold the same batch in the same order as one process
 *   estimate  advantages, the filter: on every rank, on the whole batch, identically
 *   update    mini-batches planned alike on every rank; each mini-batch's rows dealt to
 *             the ranks by token count (balanceRows; a row's images lent by the rank that
 *             played it), each rank backpropagates its rows divided by the whole
 *             mini-batch's counts; gradients are summed across ranks (in buckets while
 *             the backward runs), then every rank clips and steps alike
 *
 * Rank 0 alone writes files. This module holds the pure parts: which items a rank plays,
 * which rows it backpropagates, and a row's wire form (what another rank needs of it).
 */
import * as torch from "../torch/index.ts";
import type { Tensor } from "../torch/index.ts";
import type { RolloutEpisode } from "../rollout/index.ts";
import type { RowImage, TrainingRow } from "../rollout/types.ts";
import type { RankContext } from "./ranks.ts";
import type { Rollout } from "./rollout-phase.ts";

/** The rank's share of a batch of `count` items: every world-th item, from its rank. */
export function rankItems(count: number, rank: number, world: number): number[] {
  const out: number[] = [];
  for (let i = rank; i < count; i += world) out.push(i);
  return out;
}

/** A row as other ranks see it: everything but its images. */
export type WireRow = Omit<TrainingRow, "images"> & { imageCount: number };

export function toWireRow(row: TrainingRow): WireRow {
  const { images, ...rest } = row;
  return { ...rest, imageCount: images.length };
}

/**
 * A row played by another rank: the same ids, masks and rewards, without its images. The
 * rank that holds it never runs a forward over it (its owner does), so the images are not
 * needed; a forward that got one anyway would be refused by the family (image tokens
 * without features), not silently wrong.
 */
export function fromWireRow(wire: WireRow, owner: number): RemoteRow {
  return { ...wire, images: [], remote: true, owner };
}

/** A row another rank played: `owner` holds its `imageCount` images (see lendRowImages). */
export type RemoteRow = TrainingRow & { remote: true; owner: number; imageCount: number };

/** Whether a row was played by this rank (and so can be run through the model here). */
export function isLocalRow(row: TrainingRow): boolean {
  return (row as { remote?: boolean }).remote !== true;
}

/** The rank that played a row (and so holds its images). */
export function rowOwner(row: TrainingRow, ctx: RankContext): number {
  return isLocalRow(row) ? ctx.rank : (row as RemoteRow).owner;
}

/** What a row costs the update's forward and backward: its prompt and response tokens. */
export function rowTokens(row: TrainingRow): number {
  return row.promptIds.length + row.responseIds.length;
}

/**
 * The rank each row is backpropagated on, so that the ranks' token counts are as even as
 * the greedy rule makes them: rows longest first (ties: the earlier row), each onto the
 * rank with the fewest tokens so far (ties: the lower rank). Pure and the same on every
 * rank, which all hold the whole batch. Groups need not stay together here: the
 * estimators ran on the whole batch before the update, and each row's loss is divided
 * by the whole mini-batch's counts, so only the sum over the ranks matters.
 *
 * tokens[i]: row i's token count; returns rank[i] in [0, world).
 */
export function balanceRows(tokens: readonly number[], world: number): number[] {
  const load = new Array<number>(world).fill(0);
  const rank = new Array<number>(tokens.length).fill(0);
  const order = tokens.map((n, i) => ({ n, i })).sort((a, b) => b.n - a.n || a.i - b.i);
  for (const { n, i } of order) {
    let best = 0;
    for (let r = 1; r < world; r++) if (load[r]! < load[best]!) best = r;
    rank[i] = best;
    load[best]! += n;
  }
  return rank;
}

/**
 * balanceRows over groups: the rows of one group (uid) go to one rank together, the
 * groups dealt by their token sums (longest first, ties: the group met first). Returns
 * each row's rank.
 */
export function balanceGroups(rows: readonly TrainingRow[], world: number): number[] {
  const index = new Map<string, number>();
  const sums: number[] = [];
  const groupOf = rows.map((r) => {
    let g = index.get(r.uid);
    if (g === undefined) {
      g = sums.length;
      index.set(r.uid, g);
      sums.push(0);
    }
    sums[g]! += rowTokens(r);
    return g;
  });
  const rank = balanceRows(sums, world);
  return groupOf.map((g) => rank[g]!);
}

/**
 * A row's images on the wire: a 4-byte little-endian length, the JSON of each image's
 * offset, length, grid and size, then every image's pixels in order.
 */
export function encodeRowImages(images: readonly RowImage[]): Uint8Array {
  const meta = new TextEncoder().encode(JSON.stringify(images.map((m) => ({ offset: m.offset, length: m.length, grid: m.grid, width: m.image.width, height: m.image.height }))));
  const pixels = images.reduce((n, m) => n + m.image.data.length, 0);
  const out = new Uint8Array(4 + meta.length + pixels);
  new DataView(out.buffer).setUint32(0, meta.length, true);
  out.set(meta, 4);
  let at = 4 + meta.length;
  for (const m of images) {
    out.set(m.image.data, at);
    at += m.image.data.length;
  }
  return out;
}

export function decodeRowImages(bytes: Uint8Array): RowImage[] {
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const metaLength = view.getUint32(0, true);
  const meta = JSON.parse(new TextDecoder().decode(bytes.subarray(4, 4 + metaLength))) as { offset: number; length: number; grid: number[]; width: number; height: number }[];
  let at = 4 + metaLength;
  return meta.map((m) => {
    const size = m.width * m.height * 3;
    const data = bytes.slice(at, at + size);
    at += size;
    if (data.length !== size) throw new Error(`decodeRowImages: an image of ${m.width}x${m.height} needs ${size} bytes, the message has ${data.length}`);
    return { offset: m.offset, length: m.length, grid: m.grid, image: { width: m.width, height: m.height, data } };
  });
}

/**
 * Rows move between ranks at the update (balanceRows), but a row's images live only on
 * the rank that played it: they were not exchanged with the rest of the row (pixels are
 * the bulk of a step's data and most rows stay home). So before an update each owner
 * lends the images of its rows that another rank will backpropagate, through the group's
 * store, under `key/<row>/<rank>`; the borrower reads them (then deletes the key, so the
 * store does not grow over a run) and puts them on its copy of the row. `needed` lists
 * (row index in `rows`, the rank that runs it). Returns the rows that got images: give
 * them back with `returnRowImages` after the update.
 */
export function lendRowImages(ctx: RankContext, key: string, rows: readonly TrainingRow[], needed: readonly { row: number; rank: number }[]): TrainingRow[] {
  const group = ctx.group;
  if (!group) return [];
  const moves = needed.filter(({ row, rank }) => {
    const r = rows[row]!;
    const owner = rowOwner(r, ctx);
    const count = isLocalRow(r) ? r.images.length : (r as RemoteRow).imageCount;
    return rank !== owner && count > 0;
  });
  // owners write every loan first, then borrowers read theirs: no rank waits on itself
  for (const { row, rank } of moves) if (rowOwner(rows[row]!, ctx) === ctx.rank) group.storeSet(`${key}/${row}/${rank}`, encodeRowImages(rows[row]!.images));
  const borrowed: TrainingRow[] = [];
  for (const { row, rank } of moves) {
    if (rank !== ctx.rank) continue;
    const r = rows[row]!;
    const name = `${key}/${row}/${rank}`;
    r.images = decodeRowImages(group.storeGet(name));
    group.storeDelete(name);
    borrowed.push(r);
  }
  return borrowed;
}

/** Drops borrowed images again: a row another rank played holds no pixels outside the update. */
export function returnRowImages(rows: readonly TrainingRow[]): void {
  for (const r of rows) r.images = [];
}

/** Columns of per-row host data as JSON-safe arrays, each row cut to its response length. */
export function encodeColumns(columns: Record<string, Float32Array[]>): string {
  return JSON.stringify(Object.fromEntries(Object.entries(columns).map(([k, rows]) => [k, rows.map((r) => Array.from(r))])));
}

export function decodeColumns(text: string): Record<string, Float32Array[]> {
  const parsed = JSON.parse(text) as Record<string, number[][]>;
  return Object.fromEntries(Object.entries(parsed).map(([k, rows]) => [k, rows.map((r) => Float32Array.from(r))]));
}

export { SINGLE_RANK, type RankContext } from "./ranks.ts";

/**
 * Every rank's `local` value, in rank order, through the group's store: rank r writes
 * `key/r` and reads the others' (each read waits up to the group's timeout, so a dead
 * rank is an error naming the key, not a hang).
 */
export function exchange<T>(ctx: RankContext, key: string, local: T): T[] {
  if (!ctx.group) return [local];
  ctx.group.storeSet(`${key}/${ctx.rank}`, JSON.stringify(local));
  const decoder = new TextDecoder();
  return Array.from({ length: ctx.world }, (_, r) => (r === ctx.rank ? local : (JSON.parse(decoder.decode(ctx.group!.storeGet(`${key}/${r}`))) as T)));
}

/** Whether any rank says yes (a collective decision: all ranks abandon a step or none). */
export function anyRank(ctx: RankContext, key: string, flag: boolean): boolean {
  return exchange(ctx, key, flag).some(Boolean);
}

/**
 * Sums each parameter's gradient over the ranks, in place, after the backward passes (a
 * parameter without a gradient on this rank, one whose rows all went to other ranks,
 * joins with zeros): the path of `trainer.ddp_bucket_mb: 0`; otherwise the optimizer's
 * GradientReducer sums them while the backward runs.
 */
export function allReduceGradients(ctx: RankContext, params: readonly Tensor[]): void {
  if (!ctx.group) return;
  const grads = params.map((p) => {
    if (!p.grad) p.grad = torch.zerosLike(p);
    return p.grad;
  });
  ctx.group.allReduceCoalesced(grads, "sum");
}

/** The sum over ranks of each value (numbers in a fixed key order). */
export function sumOverRanks(ctx: RankContext, values: Record<string, number>): Record<string, number> {
  if (!ctx.group) return values;
  const keys = Object.keys(values).sort();
  // Gloo reduces host tensors, NCCL device ones
  const device = ctx.group.backend === "nccl" ? (ctx.device ?? `cuda:${ctx.group.localRank}`) : "cpu";
  const t = torch.tensor(Float64Array.from(keys.map((k) => values[k]!)), [keys.length], { dtype: "f64", device: device as never });
  try {
    ctx.group.allReduce(t, "sum");
    const summed = torch.tidy(() => t.to({ device: "cpu" }).toFloat64Array());
    return Object.fromEntries(keys.map((k, i) => [k, summed[i]!]));
  } finally {
    t.dispose();
  }
}

/** An episode as other ranks see it: what the step's metrics, reward checks and validation read. */
export interface WireEpisode {
  tag: string;
  env: string;
  seed: number;
  episodeId: string;
  trajIndex: number;
  /** The item's position in the whole step (its uid's number): the order of one process. */
  order: number;
  success: boolean;
  totalReward: number;
  turns: { reward: number; text: string }[];
  dropped?: string;
  error?: { kind: "model_error" | "env_error"; message: string };
}

/** What a rank sends after its rollout. */
export interface WireRollout {
  /** The rank was interrupted in its rollout: every rank abandons the step. */
  abandoned: boolean;
  rows: WireRow[];
  episodes: WireEpisode[];
  stateRewardMetrics: Record<string, number>;
}

/** The item position of a row or episode, from its uid `<split>-<step>-<i>`. */
function itemOrder(uid: string): number {
  const i = Number(uid.slice(uid.lastIndexOf("-") + 1));
  return Number.isFinite(i) ? i : 0;
}

export function toWireRollout(roll: Pick<Rollout, "rows" | "episodes" | "tags" | "stateRewardMetrics">): WireRollout {
  return {
    abandoned: false,
    rows: roll.rows.map(toWireRow),
    episodes: roll.episodes.map((e) => ({
      tag: roll.tags.get(e) ?? e.item.env,
      env: e.item.env,
      seed: e.item.seed,
      episodeId: e.episodeId,
      trajIndex: e.trajIndex,
      order: itemOrder(e.uid),
      success: e.rows[0]?.success ?? false,
      totalReward: e.record.totalReward,
      turns: e.record.turns.map((t) => ({ reward: t.reward, text: t.completion.text })),
      ...(e.dropped ? { dropped: e.dropped } : {}),
      ...(e.record.error ? { error: e.record.error } : {}),
    })),
    stateRewardMetrics: roll.stateRewardMetrics,
  };
}

/**
 * The step's whole rollout from every rank's share, ordered as one process orders it (env
 * specs in order of first appearance, then items, then rollouts, then conversations): this
 * rank's rows keep their images, the others' come without. Episodes of other ranks are
 * summaries (no transcript): enough for the step's metrics, not for dumps. World-model
 * reward metrics (per-episode means) are averaged over the ranks that report them.
 */
export function mergeRollouts(local: Rollout, parts: readonly WireRollout[], tagOrder: readonly string[]): Rollout {
  // (spec, item, rollout, conversation), compared in that order
  const key = (tag: string, order: number, traj: number, turn: number) => [tagOrder.indexOf(tag), order, traj, turn];
  const compare = (a: number[], b: number[]) => {
    for (let i = 0; i < a.length; i++) if (a[i] !== b[i]) return a[i]! - b[i]!;
    return 0;
  };
  const localRows = new Map(local.rows.map((r) => [`${r.episodeId}|${r.turnIndex}`, r]));
  const tagOf = new Map<string, string>();
  for (const part of parts) for (const e of part.episodes) tagOf.set(e.episodeId, e.tag);
  const rows = parts.flatMap((part, owner) => part.rows.map((w): TrainingRow => localRows.get(`${w.episodeId}|${w.turnIndex}`) ?? fromWireRow(w, owner)));
  const rowKey = (r: TrainingRow) => key(tagOf.get(r.episodeId) ?? r.env, itemOrder(r.uid), r.trajIndex, r.turnIndex);
  rows.sort((a, b) => compare(rowKey(a), rowKey(b)));
  const summaries = parts.flatMap((p) => p.episodes).sort((a, b) => compare(key(a.tag, a.order, a.trajIndex, 0), key(b.tag, b.order, b.trajIndex, 0)));
  const tags = new Map<RolloutEpisode, string>();
  const episodes = summaries.map((s) => {
    const e = summaryEpisode(s, rows);
    tags.set(e, s.tag);
    return e;
  });
  const stateRewardMetrics: Record<string, number> = {};
  const counts: Record<string, number> = {};
  for (const part of parts) {
    for (const [k, v] of Object.entries(part.stateRewardMetrics)) {
      stateRewardMetrics[k] = (stateRewardMetrics[k] ?? 0) + v;
      counts[k] = (counts[k] ?? 0) + 1;
    }
  }
  for (const k of Object.keys(stateRewardMetrics)) stateRewardMetrics[k]! /= counts[k]!;
  return { rows, episodes, tags, stateRewardMetrics };
}

/** A summary in the shape of a RolloutEpisode, for the code that reads episodes' outcomes. */
function summaryEpisode(s: WireEpisode, rows: readonly TrainingRow[]): RolloutEpisode {
  return {
    item: { env: s.env, seed: s.seed },
    itemIndex: s.order,
    uid: "",
    episodeId: s.episodeId,
    trajIndex: s.trajIndex,
    rows: rows.filter((r) => r.episodeId === s.episodeId),
    ...(s.dropped ? { dropped: s.dropped as RolloutEpisode["dropped"] } : {}),
    record: {
      totalReward: s.totalReward,
      turns: s.turns.map((t) => ({ reward: t.reward, completion: { text: t.text } })),
      ...(s.error ? { error: s.error } : {}),
    } as unknown as RolloutEpisode["record"],
  };
}
