/**
 * Collect a batch of rollouts: for each dataset item (an env spec with a seed), `n`
 * episodes through a harness and the in-process engine, all of them at once so the
 * engine batches their generations; then each episode's conversations into rows.
 *
 * The `n` episodes of one item form a group: they share its `uid` (GRPO's group) and
 * are told apart by `trajIndex` (verl's traj_idx). An episode that cannot be trained on
 * (unusable, or ended by a model or env error) is dropped and counted; it never fails the
 * batch. A batch that gives no row at all does (VAGEN raises too: there is nothing to
 * train on, and silently skipping the step would hide the cause).
 *
 * Training sampling (temperature, top_p) and validation sampling (greedy, one rollout)
 * are two calls with different `sampling` and `n`; nothing here knows which is which.
 */
import { createEnv } from "../../envs/registry.ts";
import type { Env } from "../../envs/_common/types.ts";
import type { InferenceClient, SamplingParams } from "../clients/types.ts";
import { blake2b } from "../core/blake2b.ts";
import { seedStreamName } from "../core/env-plan.ts";
import { VagenError } from "../core/errors.ts";
import type { EpisodeRecord, Harness } from "../harness/types.ts";
import { rowsFromEpisode, type DropReason, type RowBudgets, type TurnScores } from "./rows.ts";
import type { TrainingRow } from "./types.ts";

/** One dataset item: an env instance (name or import path, its config) and the seed to reset it with. */
export interface RolloutItem {
  env: string;
  config?: Record<string, unknown>;
  seed: number;
  /** The group id its rollouts share; default derived from the item's position and seed. */
  uid?: string;
  /** Directory an env import path is resolved against. */
  baseDir?: string;
  /** The env's image placeholder when it is not "<image>". */
  imagePlaceholder?: string;
  /**
   * The item's position in the whole batch (default: its position in `items`). A
   * data-parallel rank rolls out a share of a batch: with the whole batch's positions its
   * episodes get the ids and sampling seeds they would get in one process.
   */
  index?: number;
}

export interface CollectOptions {
  /** A client that keeps token-level conversations (`engineClientFor(loaded)`). */
  client: InferenceClient;
  items: readonly RolloutItem[];
  /** Rollouts per item (the group size). */
  n: number;
  harness: Harness;
  sampling: SamplingParams;
  maxTurns: number;
  budgets?: RowBudgets;
  /**
   * Makes episodes reproducible (VAGEN's rollout.full_determinism): each episode's id is
   * derived from this seed, its item and its rollout index instead of random, and it
   * samples with a seed derived from that id (then one per model call). Give each step
   * its own (trainer seed + step, say), or every step replays the same draws.
   */
  seed?: number;
  /** Builds an episode's env (default: the env registry's `createEnv`). */
  createEnv?: (item: RolloutItem) => Promise<Env>;
  signal?: AbortSignal;
  /**
   * Scores beyond the env's reward (world-model rewards, src/rewards), asked once every
   * episode of the batch is in, so a judge sees one batch: per episode, per turn (in the
   * record's order), the scores of that turn or undefined.
   */
  scoreTurns?: (episodes: readonly EpisodeRecord[], signal?: AbortSignal) => Promise<(TurnScores | undefined)[][]>;
  /**
   * Fail when the batch gives no row at all (default true). A caller that splits one
   * training batch into several calls (one per env spec) sets false and checks the union.
   */
  requireRows?: boolean;
  /** Called as each episode's rows are built (progress, dumps). */
  onEpisode?: (episode: RolloutEpisode) => void;
}

export interface RolloutEpisode {
  item: RolloutItem;
  itemIndex: number;
  uid: string;
  episodeId: string;
  trajIndex: number;
  record: EpisodeRecord;
  /** The episode's rows (empty when dropped). */
  rows: TrainingRow[];
  dropped?: DropReason;
}

export interface RolloutMetrics {
  episodes: number;
  rows: number;
  /** Episodes dropped, by reason. */
  dropped: Partial<Record<DropReason, number>>;
  /** Episodes by how they ended (done, success, max_turns, no_room, ...). */
  finishReasons: Record<string, number>;
  /** Rows whose response was cut at the response budget. */
  truncatedRows: number;
  /** Mean of the kept episodes' total rewards, and their success rate. */
  meanEpisodeReward: number;
  successRate: number;
  /** Mean model turns per kept episode, and sampled tokens per row. */
  meanTurns: number;
  meanResponseTokens: number;
}

export interface RolloutBatch {
  /** Rows of every kept episode, grouped by item then rollout, in conversation order. */
  rows: TrainingRow[];
  episodes: RolloutEpisode[];
  metrics: RolloutMetrics;
}

export async function collectRollouts(options: CollectOptions): Promise<RolloutBatch> {
  const { client, items, n, harness } = options;
  if (!client.openConversation) {
    throw new VagenError(`${client.description}: rollouts need token-level conversations (the in-process engine client); this client only speaks messages`);
  }
  if (!Number.isInteger(n) || n < 1) throw new VagenError(`rollouts per item must be a positive integer, got ${n}`);
  const makeEnv = options.createEnv ?? ((item: RolloutItem) => createEnv(item.env, item.config ?? {}, item.baseDir));

  const jobs = items.flatMap((item, position) => {
    const itemIndex = item.index ?? position;
    const uid = item.uid ?? `${itemIndex}:${item.env}:${item.seed}`;
    return Array.from({ length: n }, (_, trajIndex) => ({ item, itemIndex, uid, trajIndex }));
  });
  const played = await Promise.all(
    jobs.map(async ({ item, itemIndex, uid, trajIndex }) => {
      const episodeId = options.seed === undefined ? randomEpisodeId() : derivedEpisodeId(item, itemIndex, trajIndex, options.seed);
      const sampling = options.seed === undefined ? options.sampling : { ...options.sampling, seed: derivedSeed(episodeId) };
      const env = await makeEnv(item);
      try {
        const record = await harness.runEpisode({
          env,
          client,
          seed: item.seed,
          maxTurns: options.maxTurns,
          sampling,
          imagePlaceholder: item.imagePlaceholder,
          signal: options.signal,
          limits: options.budgets,
        });
        return { item, itemIndex, uid, episodeId, trajIndex, record };
      } finally {
        // A failing close must not cost the episode (or the batch) its rows.
        await env.close().catch(() => undefined);
      }
    }),
  );
  const scores = options.scoreTurns ? await options.scoreTurns(played.map((p) => p.record), options.signal) : undefined;
  if (scores && scores.length !== played.length) throw new VagenError(`scoreTurns returned scores for ${scores.length} episode(s); the batch has ${played.length}`);
  const episodes = played.map((p, i): RolloutEpisode => {
    const built = rowsFromEpisode(p.record, { uid: p.uid, episodeId: p.episodeId, trajIndex: p.trajIndex, env: p.item.env, seed: p.item.seed }, options.budgets, scores?.[i]);
    const episode: RolloutEpisode = { ...p, rows: built.rows, ...(built.dropped ? { dropped: built.dropped } : {}) };
    options.onEpisode?.(episode);
    return episode;
  });
  const rows = episodes.flatMap((e) => e.rows);
  if (rows.length === 0 && options.requireRows !== false) {
    const reasons = Object.entries(countBy(episodes.flatMap((e) => (e.dropped ? [e.dropped] : []))));
    throw new VagenError(
      `the rollout batch gave no training rows: all ${episodes.length} episode(s) were dropped (${reasons.map(([r, k]) => `${r}: ${k}`).join(", ") || "none had a sampled token"})`,
    );
  }
  return { rows, episodes, metrics: rolloutMetrics(episodes) };
}

export function rolloutMetrics(episodes: readonly RolloutEpisode[]): RolloutMetrics {
  const kept = episodes.filter((e) => e.dropped === undefined);
  const rows = kept.flatMap((e) => e.rows);
  const mean = (xs: number[]) => (xs.length ? xs.reduce((a, b) => a + b, 0) / xs.length : 0);
  return {
    episodes: episodes.length,
    rows: rows.length,
    dropped: countBy(episodes.flatMap((e) => (e.dropped ? [e.dropped] : []))),
    finishReasons: countBy(episodes.map((e) => e.record.finishReason)),
    truncatedRows: rows.filter((r) => r.truncation !== "none").length,
    meanEpisodeReward: mean(kept.map((e) => e.record.totalReward)),
    successRate: mean(kept.map((e) => (e.rows[0]?.success ? 1 : 0))),
    meanTurns: mean(kept.map((e) => e.record.turns.length)),
    meanResponseTokens: mean(rows.map((r) => r.responseMask.reduce((a, b) => a + b, 0))),
  };
}

function countBy<K extends string>(keys: readonly K[]): Partial<Record<K, number>> & Record<string, number> {
  const out: Record<string, number> = {};
  for (const k of keys) out[k] = (out[k] ?? 0) + 1;
  return out as Partial<Record<K, number>> & Record<string, number>;
}

function randomEpisodeId(): string {
  return crypto.randomUUID().replaceAll("-", "");
}

/**
 * VAGEN's deterministic episode id: "vagen-" + blake2b-128 of (env, seed, item index, traj
 * index). An env given by import path counts by its file's base name and export
 * (`seedStreamName`): configs make the path absolute, and hashing it made the same config
 * sample other tokens from another checkout.
 */
export function derivedEpisodeId(item: RolloutItem, itemIndex: number, trajIndex: number, rolloutSeed: number): string {
  const digest = blake2b(new TextEncoder().encode(JSON.stringify([seedStreamName(item.env), item.seed, itemIndex, trajIndex, rolloutSeed])), 16);
  return `vagen-${Buffer.from(digest).toString("hex")}`;
}

/** An episode's sampling seed: the first 31 bits of its id's hash, so the `n` rollouts of a group differ. */
function derivedSeed(episodeId: string): number {
  const digest = blake2b(new TextEncoder().encode(episodeId), 4);
  return new DataView(digest.buffer, digest.byteOffset, 4).getUint32(0) & 0x7fffffff;
}
