/**
 * VAGEN's training loop (spec §9.5) in one process. The engine generates with the very
 * weight tensors the optimizer updates (`createEngine(actor)`): no weight sync, no second
 * copy of the policy.
 *
 *   [validate]                                   trainer.val_before_train
 *   for step in start+1 .. total_steps:
 *     items   = dataset.next(train_batch_size)   shuffled env instances with their seeds
 *     rows    = collectRollouts(items, n)        episodes -> token rows (rewards placed)
 *     old     = actor log-probs (or the engine's, when exactly on-policy)
 *     ref     = reference log-probs              only when a KL term reads them
 *     values  = critic values                    only with a critic
 *     adv     = estimator(rewards, values)       (+ KL in reward), then the filter
 *     critic update; actor update once step >= critic_warmup
 *     metrics -> metrics.jsonl + TensorBoard; rollouts/ and batches/ dumps
 *     validate every test_freq; checkpoint every save_freq; both at the end
 *
 * `runTraining` is a function of a checked config that emits typed events and returns;
 * the CLI (and `vagen demo`) choose how to show them.
 */
import { existsSync, mkdirSync, renameSync, rmSync } from "node:fs";
import { join } from "node:path";
import * as torch from "../torch/index.ts";
import type { Tensor } from "../torch/index.ts";
import {
  applyKlPenalty,
  computeAdvantages,
  createKlController,
  rewardVarianceFilter,
  rewardVarianceTopPFilter,
  type KlController,
  type SampledKlPenalty,
} from "../algorithms/index.ts";
import { engineClientFor } from "../clients/engine-client.ts";
import type { EngineClient } from "../clients/engine-client.ts";
import { VagenError } from "../core/errors.ts";
import { Rng, stableHash32 } from "../core/rng.ts";
import { createEngine, type LoadedEngine } from "../engine/index.ts";
import type { Env } from "../../envs/_common/types.ts";
import { createHarness } from "../harness/registry.ts";
import type { Harness } from "../harness/types.ts";
import { loadModelFamily, type ModelFamily, type ValueHead } from "../models/index.ts";
import { collectRollouts, type RolloutEpisode, type RolloutItem } from "../rollout/index.ts";
import type { TrainingRow } from "../rollout/types.ts";
import {
  latestCheckpoint,
  loadPart,
  readTrainerState,
  removeStaleCheckpointTemporaries,
  restoreTorchRng,
  saveCheckpoint,
  torchRngHex,
  type ModelPart,
  type TrainerState,
} from "./checkpoint.ts";
import { advantageBatch, isDegenerate, maskedStats, splitRows, summarize } from "./columns.ts";
import type { CheckedTrainConfig, TrainConfig, TrainEnvSpec } from "./config.ts";
import { EnvDataset, datasetItems, type DatasetItem } from "./dataset.ts";
import type { TrainEvent, TrainEventListener, TrainPhase } from "./events.ts";
import { policyForward, TrainingModel, valueForward } from "./forward.ts";
import { dumpBatch, dumpEpisodes, MetricsLog, writeResolvedConfig } from "./outputs.ts";
import { TensorBoardWriter } from "./tensorboard.ts";
import { ParameterOptimizer, trainableWeights, updateActor, updateCritic, type OptimizerSettings, type RowColumns } from "./update.ts";
import { Watchdog } from "./watchdog.ts";
import { checkResponseFormats } from "./preflight.ts";
import { prepareStateRewards, rewardedEnvFactory, StateRewardScorers, type SpecSetups } from "./state-rewards.ts";
import { createEnv } from "../../envs/registry.ts";

export interface TrainOptions {
  onEvent?: TrainEventListener;
  /** Aborting finishes nothing more: the current step is abandoned, a checkpoint of the last finished step is saved. */
  signal?: AbortSignal;
  /** Stop after this many steps in this process (a run in parts; the next part resumes). */
  maxStepsThisRun?: number;
  /** Builds an episode's env (default: the env registry). */
  createEnv?: (item: RolloutItem) => Promise<Env>;
}

export interface TrainResult {
  step: number;
  reason: "completed" | "interrupted" | "stopped";
  checkpoint?: string;
  outputDir: string;
}

/** The models a run holds: the actor (and the engine over it), the critic, the reference. */
interface Models {
  actor: TrainingModel;
  actorOptim: ParameterOptimizer;
  critic?: { model: TrainingModel; head: ValueHead; named: Map<string, Tensor>; optim: ParameterOptimizer };
  reference?: TrainingModel;
  engine: LoadedEngine;
  client: EngineClient;
}

function optimizerSettings(optim: TrainConfig["actor"]["optim"], totalSteps: number): OptimizerSettings {
  const warmupSteps = optim.lr_warmup_steps >= 0 ? optim.lr_warmup_steps : Math.floor(optim.lr_warmup_steps_ratio * totalSteps);
  return {
    lr: optim.lr,
    weightDecay: optim.weight_decay,
    betas: optim.betas,
    eps: optim.eps,
    warmupSteps,
    style: optim.warmup_style,
    minLrRatio: optim.min_lr_ratio,
    totalSteps,
  };
}

function loadModels(config: TrainConfig, useCritic: boolean, useReference: boolean): Models {
  const load = (): ModelFamily => loadModelFamily(config.model.model_dir, { device: config.model.device, dtype: config.model.dtype });
  const actor = new TrainingModel(load());
  const actorOptim = new ParameterOptimizer(trainableWeights(actor.weights, actor.family, config.actor.freeze_vision_tower), optimizerSettings(config.actor.optim, config.trainer.total_steps));
  let critic: Models["critic"];
  if (useCritic) {
    const model = new TrainingModel(load());
    const head = model.newValueHead(config.critic.value_head_seed);
    // The critic never reads the LM head; leaving it out keeps AdamW from holding its moments.
    const named = new Map([...model.weights].filter(([name]) => name !== "lm_head.weight"));
    for (const [name, t] of head.entries()) named.set(name, t);
    const optim = new ParameterOptimizer(trainableWeights(named, model.family, config.critic.freeze_vision_tower), optimizerSettings(config.critic.optim, config.trainer.total_steps));
    critic = { model, head, named, optim };
  }
  const reference = useReference ? new TrainingModel(load()) : undefined;
  const engine = createEngine(actor.family, { ...config.rollout.engine, seed: config.trainer.seed });
  return { actor, actorOptim, critic, reference, engine, client: engineClientFor(engine) };
}

async function disposeModels(m: Models): Promise<void> {
  await m.engine.close();
  m.actorOptim.dispose();
  m.actor.family.dispose();
  if (m.critic) {
    m.critic.optim.dispose();
    for (const [, t] of m.critic.head.entries()) t.dispose();
    m.critic.model.family.dispose();
  }
  m.reference?.family.dispose();
}

/** Micro-batched, gradient-free per-row outputs of one forward kind. */
function forwardRows(rows: readonly TrainingRow[], micro: number, run: (part: TrainingRow[]) => Tensor): Float32Array[] {
  const out: Float32Array[] = [];
  torch.noGrad(() => {
    for (let i = 0; i < rows.length; i += micro) {
      const part = rows.slice(i, i + micro);
      torch.tidy(() => {
        out.push(...splitRows(run(part), part));
      });
    }
  });
  return out;
}

/** The seed of a step's rollouts: fixed by the run's seed, the split and the step. */
function rolloutSeed(seed: number, split: string, step: number, tag: string): number {
  return stableHash32(`${seed}|${split}|${step}|${tag}`) & 0x7fffffff;
}

interface Rollout {
  rows: TrainingRow[];
  episodes: RolloutEpisode[];
  tags: Map<RolloutEpisode, string>;
  /** `<split>/<tag>/<metric>` of the world-model rewards, for the specs that have them on. */
  stateRewardMetrics: Record<string, number>;
}

/**
 * Runs the items' episodes, all at once so the engine batches every generation: one
 * collectRollouts per env spec (each has its own turn limit and per-turn length).
 */
async function rollout(
  ctx: {
    config: TrainConfig;
    harness: Harness;
    client: EngineClient;
    setups: SpecSetups;
    stateRewards: StateRewardScorers;
    createEnv?: TrainOptions["createEnv"];
    signal?: AbortSignal;
  },
  items: readonly DatasetItem[],
  opts: { split: "train" | "val"; step: number; n: number; temperature: number; topP: number; onEpisode: (e: RolloutEpisode, tag: string) => void },
): Promise<Rollout> {
  const byTag = new Map<string, { spec: TrainEnvSpec; items: RolloutItem[] }>();
  items.forEach((item, i) => {
    const group = byTag.get(item.tag) ?? { spec: item.spec, items: [] };
    // The env gets its config without state_reward (prepareStateRewards split it off).
    const config = ctx.setups[opts.split].get(item.tag)?.envConfig ?? item.spec.config;
    group.items.push({ env: item.spec.name, config, seed: item.seed, uid: `${opts.split}-${opts.step}-${i}` });
    byTag.set(item.tag, group);
  });
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
  if (rows.length === 0 && opts.split === "train") {
    const reasons = new Map<string, number>();
    for (const e of episodes) if (e.dropped) reasons.set(e.dropped, (reasons.get(e.dropped) ?? 0) + 1);
    throw new VagenError(
      `step ${opts.step}: the rollout batch gave no training rows: all ${episodes.length} episode(s) were dropped (${[...reasons].map(([r, k]) => `${r}: ${k}`).join(", ") || "none had a sampled token"})`,
      "context_too_large: raise data.max_prompt_length / max_response_length; env_error or model_error: see rollouts/ and the env",
    );
  }
  return { rows, episodes, tags, stateRewardMetrics };
}

/** The env registry, as collectRollouts builds an episode's env by default. */
function registryEnv(item: RolloutItem): Promise<Env> {
  return createEnv(item.env, item.config ?? {}, item.baseDir);
}

/** train/<tag>/success_rate and mean_reward (or val/...), over kept and dropped episodes alike. */
function envMetrics(prefix: string, episodes: readonly RolloutEpisode[], tags: Map<RolloutEpisode, string>): Record<string, number> {
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

class Timer {
  readonly timings: Record<string, number> = {};

  constructor(
    private readonly step: number,
    private readonly emit: (e: TrainEvent) => void,
    private readonly watchdog: Watchdog,
  ) {}

  async phase<T>(phase: TrainPhase, key: string, fn: () => T | Promise<T>, waitingFor: string): Promise<T> {
    this.emit({ type: "phase_started", step: this.step, phase });
    const t0 = performance.now();
    const result = await this.watchdog.guard(phase, waitingFor, () => fn());
    const seconds = (performance.now() - t0) / 1000;
    this.timings[`timing_s/${key}`] = (this.timings[`timing_s/${key}`] ?? 0) + seconds;
    this.emit({ type: "phase_finished", step: this.step, phase, seconds });
    return result;
  }
}

export async function runTraining(checked: CheckedTrainConfig, opts: TrainOptions = {}): Promise<TrainResult> {
  const { config, estimator, useCritic, useReference } = checked;
  const { trainer, data, rollout: rolloutCfg, actor: actorCfg, critic: criticCfg, algorithm } = config;
  const emit = (e: TrainEvent) => opts.onEvent?.(e);
  const outputDir = trainer.output_dir;
  const ckptRoot = join(outputDir, "checkpoints");
  mkdirSync(outputDir, { recursive: true });
  removeStaleCheckpointTemporaries(ckptRoot);

  // Where to resume from: decided before any model is loaded, so a bad path fails fast.
  const resumeFrom = trainer.resume === "never" ? undefined : trainer.resume === "auto" ? latestCheckpoint(ckptRoot) : trainer.resume;
  if (resumeFrom && !existsSync(join(resumeFrom, "state.json"))) {
    throw new VagenError(`${checked.file}: key "trainer.resume": ${resumeFrom} is not a complete checkpoint (no state.json)`);
  }
  writeResolvedConfig(outputDir, config);

  // World-model rewards: split off, validated and checked against their envs before any model loads.
  const makeEnv = (name: string, envConfig: Record<string, unknown>) =>
    opts.createEnv ? opts.createEnv({ env: name, config: envConfig, seed: 0 }) : createEnv(name, envConfig);
  const setups = await prepareStateRewards(data, checked.file, makeEnv);

  torch.manualSeed(trainer.seed);
  const harness = await createHarness(trainer.harness);
  const models = loadModels(config, useCritic, useReference);
  let stateRewards: StateRewardScorers;
  try {
    const { family } = models.actor;
    stateRewards = new StateRewardScorers(setups, { tokenBytes: family.tokenizer.tokenBytes(), decode: (ids) => family.decode(ids) });
    await checkResponseFormats(
      Object.entries(data.train).map(([tag, spec]) => {
        const setup = setups.train.get(tag)!;
        const create = rewardedEnvFactory(setup, () => createEnv(spec.name, setup.envConfig));
        return { key: `${checked.file}: key "data.train.${tag}"`, create: () => create(undefined) };
      }),
      { encode: (text) => models.actor.family.tokenizer.encode(text), decode: (ids) => models.actor.family.decode(ids) },
    );
  } catch (err) {
    await disposeModels(models);
    throw err;
  }
  const dataset = new EnvDataset(datasetItems(data.train, data.base_seed, "data.train"), { shuffle: data.shuffle, seed: trainer.seed });
  const valItems = datasetItems(data.val, data.base_seed, "data.val");
  let kl: KlController = createKlController(algorithm.kl_ctrl);
  let startStep = 0;
  let bestValReward: number | null = null;

  if (resumeFrom) {
    const state = readTrainerState(resumeFrom);
    const actorOpt = loadPart(join(resumeFrom, "actor"), models.actor.weights);
    models.actorOptim.optimizer.loadStateDict(actorOpt);
    for (const t of actorOpt.tensors.values()) t.dispose();
    models.actorOptim.scheduler.setStep(state.actorSchedulerStep);
    if (models.critic) {
      const criticOpt = loadPart(join(resumeFrom, "critic"), models.critic.named);
      models.critic.optim.optimizer.loadStateDict(criticOpt);
      for (const t of criticOpt.tensors.values()) t.dispose();
      models.critic.optim.scheduler.setStep(state.criticSchedulerStep ?? 0);
    }
    dataset.seek(state.data);
    restoreTorchRng(state.torchRngState);
    // An adaptive controller continues from the coefficient it had reached.
    kl = createKlController({ ...algorithm.kl_ctrl, kl_coef: state.klCoef });
    bestValReward = state.bestValReward;
    startStep = state.step;
  }

  const metricsLog = new MetricsLog(outputDir, resumeFrom ? startStep : undefined);
  const tensorboard = trainer.tensorboard ? new TensorBoardWriter(join(outputDir, "tensorboard")) : undefined;
  const watchdog = new Watchdog(trainer.watchdog_s);
  const ctx = { config, harness, client: models.client, setups, stateRewards, createEnv: opts.createEnv, signal: opts.signal };
  emit({
    type: "run_started",
    outputDir,
    startStep,
    totalSteps: trainer.total_steps,
    estimator: estimator.spec.name,
    useCritic,
    envs: Object.keys(data.train),
    device: config.model.device,
    dtype: config.model.dtype,
    ...(resumeFrom ? { resumedFrom: resumeFrom } : {}),
  });

  const state = (step: number): TrainerState => ({
    step,
    data: dataset.position,
    actorSchedulerStep: models.actorOptim.scheduler.lastStep,
    criticSchedulerStep: models.critic?.optim.scheduler.lastStep,
    klCoef: kl.value,
    bestValReward,
    torchRngState: torchRngHex(),
  });
  const parts = (): { actor: ModelPart; critic?: ModelPart } => ({
    actor: { weights: models.actor.weights, optimizer: models.actorOptim.optimizer.stateDict() },
    ...(models.critic ? { critic: { weights: models.critic.named, optimizer: models.critic.optim.optimizer.stateDict() } } : {}),
  });
  let lastCheckpoint: string | undefined = resumeFrom;
  const checkpoint = (step: number): void => {
    const t0 = performance.now();
    lastCheckpoint = saveCheckpoint(ckptRoot, parts(), state(step), trainer.keep_checkpoints);
    emit({ type: "checkpoint_saved", step, path: lastCheckpoint, seconds: (performance.now() - t0) / 1000, bestActor: false });
  };

  const validate = async (step: number): Promise<Record<string, number>> => {
    if (valItems.length === 0) return {};
    const val = await watchdog.guard("validation", "validation episodes", () =>
      rollout(ctx, valItems, {
        split: "val",
        step,
        n: rolloutCfg.val_kwargs.n,
        temperature: rolloutCfg.val_kwargs.temperature,
        topP: rolloutCfg.val_kwargs.top_p,
        onEpisode: (e, tag) => emit({ type: "episode_finished", step, split: "val", env: tag, episodeId: e.episodeId, seed: e.item.seed, reward: e.record.totalReward, success: e.rows[0]?.success ?? false, turns: e.record.turns.length, ...(e.record.error ? { error: e.record.error.message } : {}) }),
      }),
    );
    const metrics = { ...envMetrics("val", val.episodes, val.tags), ...val.stateRewardMetrics };
    const tags = Object.keys(data.val);
    const meanReward = tags.reduce((s, t) => s + (metrics[`val/${t}/mean_reward`] ?? 0), 0) / tags.length;
    const best = trainer.save_best_actor && (bestValReward === null || meanReward > bestValReward);
    if (best) {
      bestValReward = meanReward;
      const t0 = performance.now();
      const path = saveBestActor(outputDir, models.actor.weights);
      emit({ type: "checkpoint_saved", step, path, seconds: (performance.now() - t0) / 1000, bestActor: true });
    }
    emit({ type: "validation", step, metrics, meanReward, best });
    return metrics;
  };

  let step = startStep;
  let reason: TrainResult["reason"] = "completed";
  try {
    if (trainer.val_before_train && startStep === 0) {
      const metrics = await validate(0);
      if (Object.keys(metrics).length) {
        metricsLog.append(0, metrics);
        tensorboard?.scalars(0, metrics);
      }
    }
    const lastStep = opts.maxStepsThisRun === undefined ? trainer.total_steps : Math.min(trainer.total_steps, startStep + opts.maxStepsThisRun);
    while (step < lastStep) {
      if (opts.signal?.aborted) {
        reason = "interrupted";
        break;
      }
      const current = step + 1;
      emit({ type: "step_started", step: current, totalSteps: trainer.total_steps });
      const stepStart = performance.now();
      const timer = new Timer(current, emit, watchdog);
      const metrics: Record<string, number> = {};
      const rng = new Rng(trainer.seed, current);

      // ---- rollout ----
      const items = dataset.next(data.train_batch_size);
      let done = 0;
      const total = items.length * rolloutCfg.n;
      const roll = await timer.phase("rollout", "gen", () =>
        rollout(ctx, items, {
          split: "train",
          step: current,
          n: rolloutCfg.n,
          temperature: rolloutCfg.temperature,
          topP: rolloutCfg.top_p,
          onEpisode: (e, tag) => {
            watchdog.touch();
            emit({ type: "episode_finished", step: current, split: "train", env: tag, episodeId: e.episodeId, seed: e.item.seed, reward: e.record.totalReward, success: e.rows[0]?.success ?? false, turns: e.record.turns.length, ...(e.record.error ? { error: e.record.error.message } : {}) });
            emit({ type: "phase_progress", step: current, phase: "rollout", done: ++done, total });
          },
        }), "episodes to finish (env steps and generation)").catch((err: unknown) => {
        // Ctrl-C during the rollout cancels its episodes; that is an interruption, not a failure.
        if (opts.signal?.aborted) return undefined;
        throw err;
      });
      if (roll === undefined || opts.signal?.aborted) {
        reason = "interrupted";
        break;
      }
      const rows = roll.rows;
      const device = models.actor.device;

      // ---- old, reference log-probs and values ----
      const onPolicyEngine = rolloutCfg.use_engine_logprobs && rows.every((r) => r.logprobsComplete);
      const micro = actorCfg.ppo_micro_batch_size;
      const lpOpts = { temperature: rolloutCfg.temperature, chunkTokens: actorCfg.logprob_chunk_tokens, withEntropy: false };
      const oldLogprobs = onPolicyEngine
        ? rows.map((r) => Float32Array.from(r.rolloutLogprobs))
        : await timer.phase("old_logprobs", "old_log_prob", () => forwardRows(rows, micro, (part) => policyForward(models.actor, part, lpOpts).logProbs), "the actor's forward");
      const refLogprobs = models.reference
        ? await timer.phase("ref_logprobs", "ref", () => forwardRows(rows, micro, (part) => policyForward(models.reference!, part, lpOpts).logProbs), "the reference forward")
        : undefined;
      const values = models.critic
        ? await timer.phase("values", "values", () => forwardRows(rows, criticCfg.ppo_micro_batch_size, (part) => valueForward(models.critic!.model, models.critic!.head, part)), "the critic's forward")
        : undefined;

      // ---- rewards, advantages, filter ----
      const adv = await timer.phase("advantages", "adv", () =>
        torch.tidy(() => {
          let tokenRewards: ArrayLike<number>[] = rows.map((r) => r.tokenRewards);
          const extra: Record<string, number> = {};
          if (algorithm.use_kl_in_reward) {
            const batch = advantageBatch(rows, tokenRewards, undefined, device);
            const R = batch.responseMask.shape[1]!;
            const asTensor = (c: ArrayLike<number>[]) => advantageBatch(rows, c, undefined, device).tokenLevelRewards.narrow(1, 0, R);
            const out = applyKlPenalty(
              { tokenLevelScores: batch.tokenLevelRewards, oldLogProb: asTensor(oldLogprobs), refLogProb: asTensor(refLogprobs!), responseMask: batch.responseMask },
              { kind: algorithm.kl_penalty as SampledKlPenalty, beta: kl.value },
            );
            tokenRewards = splitRows(out.tokenLevelRewards, rows);
            Object.assign(extra, out.metrics);
            kl.update(out.currentKl, rows.length);
          }
          const out = computeAdvantages(estimator, advantageBatch(rows, tokenRewards, values, device));
          return {
            tokenRewards,
            advantages: splitRows(out.advantages, rows),
            returns: splitRows(out.returns, rows),
            valueMask: out.valueMask ? splitRows(out.valueMask, rows) : undefined,
            turnIds: out.turnIds ? splitRows(out.turnIds, rows).map((a) => Int32Array.from(a)) : undefined,
            extra,
          };
        }), "the estimator");
      Object.assign(metrics, adv.extra);

      let keep = rows.map((_, i) => i);
      let advantages = adv.advantages;
      if (config.filter.enable) {
        const rewards = rows.map((_, b) => Array.from(adv.tokenRewards[b]!).reduce((a, x) => a + x, 0));
        const filtered =
          config.filter.name === "reward_variance_top_p"
            ? rewardVarianceTopPFilter({ rewards, groupIds: rows.map((r) => r.uid) }, { topP: config.filter.filter_kwargs.top_p })
            : rewardVarianceFilter({ rewards, groupIds: rows.map((r) => r.uid) }, { topk: config.filter.filter_kwargs.topk });
        keep = filtered.keepRows;
        advantages = advantages.map((a) => a.map((x) => x * filtered.lossScale));
        Object.assign(metrics, filtered.metrics);
      }
      const pick = <T>(a: readonly T[] | undefined): T[] | undefined => (a ? keep.map((i) => a[i]!) : undefined);
      const trainRows = pick(rows)!;
      const cols: RowColumns = {
        oldLogprobs: pick(oldLogprobs)!,
        advantages: pick(advantages)!,
        returns: pick(adv.returns),
        values: pick(values),
        refLogprobs: pick(refLogprobs),
        valueMask: pick(adv.valueMask),
        turnIds: pick(adv.turnIds),
      };

      // ---- updates ----
      const miniCount = (cfg: { ppo_mini_batch_size: number }) => data.train_batch_size / cfg.ppo_mini_batch_size;
      if (models.critic) {
        const c = models.critic;
        Object.assign(metrics, await timer.phase("critic_update", "update_critic", () =>
          updateCritic(c.model, c.head, c.optim, trainRows, cols, {
            miniBatches: miniCount(criticCfg),
            microBatchSize: criticCfg.ppo_micro_batch_size,
            maxTokens: criticCfg.use_dynamic_bsz ? criticCfg.ppo_max_token_len : undefined,
            epochs: criticCfg.ppo_epochs,
            shuffle: criticCfg.shuffle,
            cliprangeValue: criticCfg.cliprange_value,
            lossAggMode: criticCfg.loss_agg_mode,
            gradClip: criticCfg.grad_clip,
          }, rng), "the critic update"));
      }
      if (trainer.critic_warmup <= current) {
        Object.assign(metrics, await timer.phase("actor_update", "update_actor", () =>
          updateActor(models.actor, models.actorOptim, trainRows, cols, {
            miniBatches: miniCount(actorCfg),
            microBatchSize: actorCfg.ppo_micro_batch_size,
            maxTokens: actorCfg.use_dynamic_bsz ? actorCfg.ppo_max_token_len : undefined,
            epochs: actorCfg.ppo_epochs,
            shuffle: actorCfg.shuffle,
            temperature: rolloutCfg.temperature,
            chunkTokens: actorCfg.logprob_chunk_tokens,
            lossMode: actorCfg.policy_loss.loss_mode,
            lossAggMode: actorCfg.loss_agg_mode,
            clipRatio: actorCfg.clip_ratio,
            clipRatioLow: actorCfg.clip_ratio_low ?? undefined,
            clipRatioHigh: actorCfg.clip_ratio_high ?? undefined,
            clipRatioC: actorCfg.clip_ratio_c,
            entropyCoeff: actorCfg.entropy_coeff,
            klLoss: actorCfg.use_kl_loss ? { coef: actorCfg.kl_loss_coef, type: actorCfg.kl_loss_type as SampledKlPenalty } : undefined,
            gradClip: actorCfg.grad_clip,
          }, rng), "the actor update"));
      }

      // ---- metrics ----
      const scores = rows.map((_, b) => Array.from(rows[b]!.tokenRewards).reduce((a, x) => a + x, 0));
      Object.assign(metrics, summarize("critic/score", scores));
      Object.assign(metrics, summarize("critic/rewards", rows.map((_, b) => Array.from(adv.tokenRewards[b]!).reduce((a, x) => a + x, 0))));
      const adStats = maskedStats(rows, adv.advantages);
      const retStats = maskedStats(rows, adv.returns);
      Object.assign(metrics, { "critic/advantages/mean": adStats.mean, "critic/advantages/max": adStats.max, "critic/advantages/min": adStats.min });
      Object.assign(metrics, { "critic/returns/mean": retStats.mean, "critic/returns/max": retStats.max, "critic/returns/min": retStats.min });
      if (values) {
        const v = maskedStats(rows, values);
        Object.assign(metrics, { "critic/values/mean": v.mean, "critic/values/max": v.max, "critic/values/min": v.min });
      }
      const sampled = rows.map((r) => r.responseMask.reduce((a, x) => a + x, 0));
      Object.assign(metrics, summarize("response_length", sampled));
      Object.assign(metrics, summarize("prompt_length", rows.map((r) => r.promptIds.length)));
      const responseTokens = rows.reduce((a, r) => a + r.responseIds.length, 0);
      metrics["rollout/loss_mask_coverage"] = responseTokens ? sampled.reduce((a, b) => a + b, 0) / responseTokens : 0;
      metrics["response_length/clip_ratio"] = rows.filter((r) => r.truncation !== "none").length / rows.length;
      const replies = roll.episodes.flatMap((e) => e.record.turns.map((t) => t.completion.text));
      metrics["rollout/degenerate_rate"] = replies.length ? replies.filter(isDegenerate).length / replies.length : 0;
      const complete = rows.map((r, b) => (r.logprobsComplete ? b : -1)).filter((b) => b >= 0);
      if (complete.length) {
        const diff = complete.map((b) => Float32Array.from(rows[b]!.rolloutLogprobs, (x, j) => Math.abs(x - oldLogprobs[b]![j]!)));
        metrics["rollout/logprob_mismatch"] = maskedStats(complete.map((b) => rows[b]!), diff).mean;
      }
      metrics["data/rows"] = rows.length;
      metrics["data/rows_trained"] = trainRows.length;
      metrics["data/dropped_episodes"] = roll.episodes.filter((e) => e.dropped).length;
      Object.assign(metrics, envMetrics("train", roll.episodes, roll.tags), roll.stateRewardMetrics);
      for (const w of troubleSigns(metrics)) emit({ type: "warning", step: current, ...w });

      if (roll.episodes.length && trainer.log_episodes > 0) {
        dumpEpisodes(join(outputDir, "rollouts", `step_${current}`), roll.episodes, trainer.log_episodes, {
          tags: roll.tags,
          model: config.model.model_dir,
          maxTurns: (tag) => data.train[tag]?.max_turns ?? Number.NaN,
        });
      }
      if (trainer.dump_batches) {
        const meta = { estimator: estimator.spec.name, step: current, ...dumpedParams(estimator) };
        dumpBatch(join(outputDir, "batches"), current, meta, rows, { tokenRewards: adv.tokenRewards, values, oldLogprobs, refLogprobs, advantages: adv.advantages, returns: adv.returns });
      }

      // ---- validation ----
      if (trainer.test_freq > 0 && (current % trainer.test_freq === 0 || current === trainer.total_steps)) {
        Object.assign(metrics, await timer.phase("validation", "testing", () => validate(current), "validation episodes"));
      }
      Object.assign(metrics, timer.timings);
      const stepSeconds = (performance.now() - stepStart) / 1000;
      metrics["timing_s/step"] = stepSeconds;
      metrics["perf/generation_share"] = (timer.timings["timing_s/gen"] ?? 0) / stepSeconds;
      step = current;
      metricsLog.append(step, metrics);
      tensorboard?.scalars(step, metrics);
      emit({ type: "metrics", step, metrics });

      // ---- checkpoint ----
      if ((trainer.save_freq > 0 && step % trainer.save_freq === 0) || (trainer.save_at_end && step === trainer.total_steps)) {
        await timer.phase("checkpoint", "save_checkpoint", () => checkpoint(step), "the checkpoint write");
      }
      emit({ type: "step_finished", step, totalSteps: trainer.total_steps, seconds: (performance.now() - stepStart) / 1000 });
    }
    if (reason === "completed" && step < trainer.total_steps) reason = "stopped";
    if (reason === "interrupted" && step > 0 && !lastCheckpoint?.endsWith(`step_${step}`)) checkpoint(step);
    emit({ type: "run_finished", step, reason: reason === "interrupted" ? "interrupted" : "completed", ...(lastCheckpoint ? { checkpoint: lastCheckpoint } : {}) });
    return { step, reason, checkpoint: lastCheckpoint, outputDir };
  } catch (err) {
    const watchdogEnd = err instanceof VagenError && err.message.startsWith("watchdog:");
    emit({ type: "run_finished", step, reason: watchdogEnd ? "watchdog" : "failed", error: (err as Error).message, ...(lastCheckpoint ? { checkpoint: lastCheckpoint } : {}) });
    throw err;
  } finally {
    watchdog.dispose();
    await disposeModels(models);
  }
}

/** VAGEN's knobs every batch dump names, plus whatever else the estimator reads. */
const DUMPED_PARAMS = ["gamma", "lam", "gamma_turn", "lambda_turn", "lambda_token", "bi_level_mix", "high_level_gamma", "norm_adv_by_std_in_grpo"] as const;

function dumpedParams(estimator: CheckedTrainConfig["estimator"]): Record<string, unknown> {
  const names = new Set<keyof typeof estimator.params>([...DUMPED_PARAMS, ...estimator.spec.reads]);
  return Object.fromEntries([...names].map((k) => [k, estimator.params[k]]));
}

/**
 * Metrics that show trouble early, turned into warnings: the trainer's log-probs drifting
 * from the engine's (a weight or template mismatch), replies collapsing into empty or
 * repeated characters, most rows cut at the response budget.
 */
export function troubleSigns(m: Record<string, number>): { code: string; message: string }[] {
  const out: { code: string; message: string }[] = [];
  const mismatch = m["rollout/logprob_mismatch"];
  if (mismatch !== undefined && mismatch > 0.05) {
    out.push({ code: "logprob_mismatch", message: `the trainer's log-probs differ from the engine's by ${mismatch.toFixed(3)} per token on average: the policy being trained is not the one that sampled` });
  }
  if ((m["rollout/degenerate_rate"] ?? 0) > 0.5) {
    out.push({ code: "degenerate_responses", message: `${Math.round(m["rollout/degenerate_rate"]! * 100)}% of replies are empty or one repeated character` });
  }
  if ((m["response_length/clip_ratio"] ?? 0) > 0.5) {
    out.push({ code: "truncation", message: `${Math.round(m["response_length/clip_ratio"]! * 100)}% of rows were truncated (by data.max_response_length, the prompt budget or the context)` });
  }
  return out;
}

/** The best actor by validation reward, apart from the resumable checkpoints (main's save_best_actor). */
function saveBestActor(outputDir: string, weights: Map<string, Tensor>): string {
  const final = join(outputDir, "best_actor");
  const tmp = join(outputDir, `.tmp-best_actor-${process.pid}`);
  rmSync(tmp, { recursive: true, force: true });
  torch.safetensors.saveSharded(tmp, weights);
  rmSync(final, { recursive: true, force: true });
  // renamed after the write: a reader never sees half a best actor
  renameSync(tmp, final);
  return final;
}
