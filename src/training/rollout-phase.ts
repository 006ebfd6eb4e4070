/**
 * The rollout phase of a training step (and of validation): a step's dataset items, all
 * their episodes at once so the engine batches every generation, one collectRollouts per
 * env spec (each has its own turn limit and per-turn length), into training rows.
 */
import type { EngineClient } from "../clients/engine-client.ts";
import { VagenError } from "../core/errors.ts";
import { stableHash32 } from "../core/rng.ts";
import type { Env } from "../../envs/_common/types.ts";
import { createEnv } from "../../envs/registry.ts";
import type { Harness } from "../harness/types.ts";
import { collectRollouts, type RolloutEpisode, type RolloutItem } from "../rollout/index.ts";
import type { TrainingRow } from "../rollout/types.ts";
import type { TrainConfig } from "./config.ts";
import type { RankContext } from "./ranks.ts";
import type { DatasetItem } from "./dataset.ts";
import { droppedSummary, formatDropped } from "./outputs.ts";
import { rewardedEnvFactory, type SpecSetups, type StateRewardScorers } from "./state-rewards.ts";

export interface RolloutContext {
  config: TrainConfig;
  harness: Harness;
  client: EngineClient;
  setups: SpecSetups;
  stateRewards: StateRewardScorers;
  /** Builds an episode's env (default: the env registry). */
  createEnv?: (item: RolloutItem) => Promise<Env>;
  signal?: AbortSignal;
}

export interface Rollout {
  rows: TrainingRow[];
  episodes: RolloutEpisode[];
  tags: Map<RolloutEpisode, string>;
  /** `<split>/<tag>/<metric>` of the world-model rewards, for the specs that have them on. */
  stateRewardMetrics: Record<string, number>;
}

/** The seed of a step's rollouts: fixed by the run's seed, the split and the step. */
function rolloutSeed(seed: number, split: string, step: number, tag: string): number {
  return stableHash32(`${seed}|${split}|${step}|${tag}`) & 0x7fffffff;
}

/** The env registry, as collectRollouts builds an episode's env by default. */
function registryEnv(item: RolloutItem): Promise<Env> {
  return createEnv(item.env, item.config ?? {}, item.baseDir);
}

/** Rewards beyond this size are a broken env, not a signal. */
const ABSURD_REWARD = 1e6;

/**
 * Refuses a reward that is not a finite number of sane size, naming the env and seed: one
 * NaN would turn every advantage of its group into NaN and the run into a silent no-op.
 */
export function checkRewards(episodes: readonly RolloutEpisode[], tags: Map<RolloutEpisode, string>): void {
  for (const e of episodes) {
    const tag = tags.get(e) ?? e.item.env;
    const bad = [e.record.totalReward, ...e.record.turns.map((t) => t.reward)].find((r) => typeof r !== "number" || !Number.isFinite(r) || Math.abs(r) > ABSURD_REWARD);
    if (bad !== undefined) {
      throw new VagenError(
        `env "${tag}" (${e.item.env}, seed ${e.item.seed}) returned the reward ${JSON.stringify(bad) ?? String(bad)}: expected a finite number of size at most ${ABSURD_REWARD}`,
        "the env's step() must return a numeric reward; fix the env",
      );
    }
  }
}

export async function rollout(
  ctx: RolloutContext,
  items: readonly DatasetItem[],
  opts: {
    split: "train" | "val";
    step: number;
    n: number;
    temperature: number;
    topP: number;
    onEpisode: (e: RolloutEpisode, tag: string) => void;
    /** Data parallel: play only this rank's items (see data-parallel.ts), with the whole batch's positions. */
    shard?: RankContext;
  },
): Promise<Rollout> {
  const byTag = new Map<string, { spec: DatasetItem["spec"]; items: RolloutItem[]; count: number }>();
  items.forEach((item, i) => {
    const group = byTag.get(item.tag) ?? { spec: item.spec, items: [], count: 0 };
    byTag.set(item.tag, group);
    const index = group.count++;
    if (opts.shard && i % opts.shard.world !== opts.shard.rank) return;
    // The env gets its config without state_reward (prepareStateRewards split it off).
    const config = ctx.setups[opts.split].get(item.tag)?.envConfig ?? item.spec.config;
    group.items.push({ env: item.spec.name, config, seed: item.seed, uid: `${opts.split}-${opts.step}-${i}`, index });
  });
  for (const [tag, group] of byTag) if (group.items.length === 0) byTag.delete(tag);
  const tags = new Map<RolloutEpisode, string>();
  const stateRewardMetrics: Record<string, number> = {};
  const batches = await Promise.all(
    [...byTag].map(async ([tag, group]) => {
      // Each spec's episodes are scored as one batch (one judge round) with the spec's own scorer.
      const stateReward = ctx.stateRewards.forStep(opts.split, tag);
      const batch = await collectRollouts({
        client: ctx.client,
        items: group.items,
        n: opts.n,
        harness: ctx.harness,
        sampling: { temperature: opts.temperature, topP: opts.topP, maxTokens: group.spec.response_length_per_turn },
        maxTurns: group.spec.max_turns,
        budgets: { maxPromptLength: ctx.config.data.max_prompt_length, maxResponseLength: ctx.config.data.max_response_length },
        seed: rolloutSeed(ctx.config.trainer.seed, opts.split, opts.step, tag),
        createEnv: rewardedEnvFactory(ctx.setups[opts.split].get(tag), ctx.createEnv ?? registryEnv),
        signal: ctx.signal,
        // One spec whose episodes all dropped does not sink the step; the union is checked below.
        requireRows: false,
        ...(stateReward.scoreTurns ? { scoreTurns: stateReward.scoreTurns } : {}),
        onEpisode: (e) => {
          tags.set(e, tag);
          opts.onEpisode(e, tag);
        },
      });
      for (const [key, value] of Object.entries(stateReward.metrics)) stateRewardMetrics[`${opts.split}/${tag}/${key}`] = value;
      return batch;
    }),
  );
  // Episodes finish in any order; rows and episodes are kept in item order so a step is reproducible.
  const episodes = batches.flatMap((b) => b.episodes);
  const rows = batches.flatMap((b) => b.rows);
  return { rows, episodes, tags, stateRewardMetrics };
}

/** Hints by drop reason: only the causes that occurred are named. */
const DROP_HINTS: Record<string, string> = {
  context_too_large: "raise data.max_prompt_length / data.max_response_length (or the engine's max_seq_len)",
  env_error: "the env failed: see its message above and the dumped episodes in rollouts/step_N/",
  model_error: "generation failed: see the message above",
  no_sampled_tokens: "no reply had a sampled token",
};

/** The error of a training step whose episodes all dropped: counts, each kind's first message, and hints for those kinds only. */
export function noRowsError(step: number, episodes: readonly RolloutEpisode[]): VagenError {
  const summary = droppedSummary(episodes);
  const kinds = Object.keys(summary.counts);
  const detail = formatDropped(summary);
  return new VagenError(
    `step ${step}: the rollout batch gave no training rows: all ${episodes.length} episode(s) were dropped (${detail || "none had a sampled token"})`,
    kinds.map((k) => DROP_HINTS[k] ?? k).join("; ") || DROP_HINTS.no_sampled_tokens,
  );
}
