/**
 * The phases of one training step, each a function that reads a StepBatch's columns and
 * adds its own (spec §9.5, verl's ray_trainer.fit):
 *
 *   rollout            episodes -> rows                                 (rollout)
 *   oldLogprobs        the actor's log-probs, or the engine's          (old_logprobs)
 *   referenceLogprobs  the frozen reference's log-probs                (ref_logprobs)
 *   criticValues       the critic's values                              (values)
 *   correctRollout     importance weights and loss mask for rollout/train mismatch
 *   rewardsWithKl      scores − β·KL(old ‖ ref) when KL is in the reward
 *   advantages         the estimator's advantages, returns, value mask, turn ids
 *   filterGroups       the variance filter over the scores (select + advantage scale)
 *
 * The updates live in update.ts; runTraining (trainer.ts) calls these in order.
 */
import * as torch from "../torch/index.ts";
import type { Tensor } from "../torch/index.ts";
import {
  applyKlPenalty,
  computeAdvantages,
  readMetrics,
  rewardVarianceFilter,
  rewardVarianceTopPFilter,
  rolloutCorrection,
  type KlController,
} from "../algorithms/index.ts";
import type { RolloutEpisode } from "../rollout/index.ts";
import type { TrainConfig, CheckedTrainConfig } from "./config.ts";
import { policyForward, valueForward, type TrainingModel } from "./forward.ts";
import type { Models } from "./models.ts";
import { StepBatch } from "./step-batch.ts";
import { microBatchPlan, yieldToEventLoop } from "./update.ts";
import { exchange, isLocalRow } from "./data-parallel.ts";
import type { RankContext } from "./ranks.ts";
import type { ValueHead } from "../models/index.ts";

/**
 * One gradient-free output per micro-batch of rows, gathered into a [B, R] column.
 * Yields to the event loop between micro-batches and calls `between` there (an
 * interrupt check may throw to abandon the phase).
 */
export async function forwardColumn(
  batch: StepBatch,
  opts: { microBatchSize: number; maxTokens?: number; dp?: DataParallelColumn },
  run: (part: StepBatch) => Tensor,
  between: () => void = () => {},
): Promise<Tensor> {
  const out = torch.zeros([batch.size, batch.width], { dtype: "f32", device: batch.device as never });
  try {
    // Data parallel: this rank runs the rows it played; the others' arrive by exchange.
    const all = batch.rows.map((_, i) => i).filter((i) => !opts.dp || isLocalRow(batch.rows[i]!));
    for (const indices of microBatchPlan(all, batch.rows, opts)) {
      using part = batch.select(indices);
      torch.noGrad(() =>
        torch.tidy(() => {
          const values = run(part).to({ dtype: "f32" });
          const index = torch.tensor(Int32Array.from(indices), [indices.length], { dtype: "i64", device: batch.device as never });
          const padded = part.width === batch.width ? values : torch.cat([values, torch.zeros([indices.length, batch.width - part.width], { device: batch.device as never })], 1);
          out.indexCopy_(0, index, padded);
        }),
      );
      await yieldToEventLoop();
      between();
    }
    if (opts.dp) fillRemoteRows(batch, out, all, opts.dp);
  } catch (err) {
    out.dispose();
    throw err;
  }
  return out;
}

/** Where a data-parallel forward exchanges its rows: the ranks and a key unique to the step and column. */
export interface DataParallelColumn {
  ranks: RankContext;
  key: string;
}

/** Sends this rank's rows of `out` to the others and writes theirs in (every rank ends with the whole column). */
function fillRemoteRows(batch: StepBatch, out: Tensor, local: readonly number[], dp: DataParallelColumn): void {
  const host = torch.tidy(() => out.to({ device: "cpu" }).contiguous().toFloat32Array());
  const mine = { rows: local, values: local.map((b) => Array.from(host.subarray(b * batch.width, b * batch.width + batch.rows[b]!.responseIds.length))) };
  for (const theirs of exchange(dp.ranks, dp.key, mine)) {
    if (theirs === mine || theirs.rows.length === 0) continue;
    torch.noGrad(() =>
      torch.tidy(() => {
        const index = torch.tensor(Int32Array.from(theirs.rows), [theirs.rows.length], { dtype: "i64", device: batch.device as never });
        out.indexCopy_(0, index, batch.tensorOf(theirs.values));
      }),
    );
  }
}

export interface LogprobOptions {
  temperature: number;
  chunkTokens: number;
  microBatchSize: number;
  maxTokens?: number;
  dp?: DataParallelColumn;
}

/** The policy's log-probs of the batch's response tokens under `model` (no gradients): [B, R]. */
export function modelLogprobs(model: TrainingModel, batch: StepBatch, opts: LogprobOptions, between?: () => void): Promise<Tensor> {
  return forwardColumn(batch, opts, (part) => policyForward(model, part.rows, { temperature: opts.temperature, chunkTokens: opts.chunkTokens, withEntropy: false }).logProbs, between);
}

/** The critic's values of the batch's response positions: [B, R]. */
export function criticValues(model: TrainingModel, head: ValueHead, batch: StepBatch, opts: { microBatchSize: number; maxTokens?: number; dp?: DataParallelColumn }, between?: () => void): Promise<Tensor> {
  return forwardColumn(batch, opts, (part) => valueForward(model, head, part.rows), between);
}

/**
 * The old log-probs: the engine's sampled ones when the config says the update is exactly
 * on-policy and every row has them, else a forward of the actor. Returns which it was.
 */
export async function oldLogprobs(models: Models, batch: StepBatch, config: TrainConfig, between?: () => void, dp?: DataParallelColumn): Promise<"engine" | "actor"> {
  if (config.rollout.use_engine_logprobs && batch.rows.every((r) => r.logprobsComplete)) {
    batch.set("oldLogprobs", batch.get("rolloutLogprobs").clone());
    return "engine";
  }
  batch.set("oldLogprobs", await modelLogprobs(models.actor, batch, { ...actorLogprobOptions(config), ...(dp ? { dp } : {}) }, between));
  return "actor";
}

export function actorLogprobOptions(config: TrainConfig): LogprobOptions {
  const a = config.actor;
  return {
    temperature: config.rollout.temperature,
    chunkTokens: a.logprob_chunk_tokens,
    microBatchSize: a.ppo_micro_batch_size,
    ...(a.use_dynamic_bsz ? { maxTokens: a.ppo_max_token_len } : {}),
  };
}

/**
 * verl's rollout correction over the batch: importance weights π_old / π_rollout
 * (`isWeights`) and the loss mask after rejection (`lossMask`), from the engine's sampled
 * log-probs. Skipped (no columns, no metrics) when it is off or some row lacks the
 * engine's log-probs. Returns the rollout_corr/* metrics.
 */
export function correctRollout(batch: StepBatch, config: TrainConfig): Record<string, number> {
  const rc = config.algorithm.rollout_correction;
  if (rc.rollout_is === null && rc.rollout_rs === null) return {};
  if (!batch.rows.every((r) => r.logprobsComplete)) return { "rollout_corr/skipped_rows_without_logprobs": batch.rows.filter((r) => !r.logprobsComplete).length };
  const out = rolloutCorrection(batch.get("oldLogprobs"), batch.get("rolloutLogprobs"), batch.get("responseMask"), {
    is: rc.rollout_is,
    isThreshold: rc.rollout_is_threshold,
    rs: rc.rollout_rs,
    rsThreshold: rc.rollout_rs_threshold,
    ...(rc.rollout_rs_threshold_lower !== null ? { rsThresholdLower: rc.rollout_rs_threshold_lower } : {}),
  });
  if (rc.rollout_is !== null) batch.set("isWeights", out.weights);
  else out.weights.dispose();
  if (rc.rollout_rs !== null) batch.set("lossMask", out.lossMask);
  else out.lossMask.dispose();
  return readMetrics(out.metrics);
}

/**
 * The token rewards the estimator reads: the env's scores, minus β·KL(old ‖ ref) on every
 * response token when algorithm.use_kl_in_reward is on (the controller is then updated
 * with the batch's KL). Returns the KL metrics.
 */
export function rewardsWithKl(batch: StepBatch, config: TrainConfig, kl: KlController): Record<string, number> {
  if (!config.algorithm.use_kl_in_reward) {
    batch.set("tokenRewards", batch.get("tokenScores").clone());
    return {};
  }
  const out = applyKlPenalty(
    { tokenLevelScores: batch.get("tokenScores"), oldLogProb: batch.get("oldLogprobs"), refLogProb: batch.get("refLogprobs"), responseMask: batch.get("responseMask") },
    { kind: config.algorithm.kl_penalty, beta: kl.value },
  );
  batch.set("tokenRewards", out.tokenLevelRewards);
  kl.update(out.currentKl, batch.size);
  return out.metrics;
}

/** The estimator over the batch: adds advantages, returns, and (where it makes them) valueMask and turnIds. */
export function advantages(batch: StepBatch, estimator: CheckedTrainConfig["estimator"]): void {
  const rows = batch.rows;
  const out = torch.noGrad(() =>
    computeAdvantages(estimator, {
      tokenLevelRewards: batch.get("tokenRewards"),
      responseMask: batch.get("responseMask"),
      values: batch.maybe("values"),
      groupIds: rows.map((r) => r.uid),
      episodeIds: rows.map((r) => r.episodeId),
      trajIndex: rows.map((r) => r.trajIndex),
      turnIndex: rows.map((r) => r.turnIndex),
      stateKeys: rows.some((r) => r.stateKeys) ? rows.map((r) => r.stateKeys ?? []) : undefined,
    }),
  );
  batch.set("advantages", out.advantages);
  batch.set("returns", out.returns);
  if (out.valueMask) batch.set("valueMask", out.valueMask);
  if (out.turnIds) batch.set("turnIds", out.turnIds);
}

/**
 * VAGEN's group filter over the rows' scores (Σ token_level_scores: the env's rewards,
 * before any KL penalty, as VAGEN filters): the kept rows as a new batch, their
 * advantages scaled by the filter's loss scale. Without a filter, the batch itself.
 */
export function filterGroups(batch: StepBatch, config: TrainConfig): { kept: StepBatch; metrics: Record<string, number> } {
  const f = config.filter;
  if (!f.enable) return { kept: batch, metrics: {} };
  const grouped = { rewards: batch.rowSums("tokenScores"), groupIds: batch.rows.map((r) => r.uid) };
  const filtered = f.name === "reward_variance_top_p" ? rewardVarianceTopPFilter(grouped, { topP: f.filter_kwargs.top_p }) : rewardVarianceFilter(grouped, { topk: f.filter_kwargs.topk });
  const kept = batch.select(filtered.keepRows);
  if (filtered.lossScale !== 1) kept.set("advantages", torch.tidy(() => kept.get("advantages").mul(filtered.lossScale)));
  return { kept, metrics: filtered.metrics };
}

/** Masked mean, max and min of a column over the response mask. */
export function columnStats(batch: StepBatch, name: Parameters<StepBatch["get"]>[0]): { mean: number; max: number; min: number } {
  return torch.tidy(() => {
    const mask = batch.get("responseMask").ne(0);
    const n = mask.to({ dtype: "f64" }).sum().item();
    if (n === 0) return { mean: 0, max: 0, min: 0 };
    const x = batch.get(name).to({ dtype: "f64" });
    return {
      mean: torch.where(mask, x, 0).sum().item() / n,
      max: torch.where(mask, x, -Infinity).max().item(),
      min: torch.where(mask, x, Infinity).min().item(),
    };
  });
}

/** train/<tag>/success_rate, mean_reward, mean_turns (or val/...), over kept and dropped episodes alike. */
export function envMetrics(prefix: string, episodes: readonly RolloutEpisode[], tags: Map<RolloutEpisode, string>): Record<string, number> {
  const per = new Map<string, { n: number; success: number; reward: number; turns: number }>();
  for (const e of episodes) {
    const tag = tags.get(e) ?? e.item.env;
    const s = per.get(tag) ?? { n: 0, success: 0, reward: 0, turns: 0 };
    s.n++;
    s.success += e.rows[0]?.success ? 1 : 0;
    s.reward += e.record.totalReward;
    s.turns += e.record.turns.length;
    per.set(tag, s);
  }
  const out: Record<string, number> = {};
  for (const [tag, s] of per) {
    out[`${prefix}/${tag}/success_rate`] = s.success / s.n;
    out[`${prefix}/${tag}/mean_reward`] = s.reward / s.n;
    out[`${prefix}/${tag}/mean_turns`] = s.turns / s.n;
  }
  return out;
}
