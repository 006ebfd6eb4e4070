/**
 * VAGEN's training loop (spec §9.5) in one process. The engine generates with the very
 * weight tensors the optimizer updates (`createEngine(actor)`): no weight sync, no second
 * copy of the policy. One step, top to bottom (each phase a function of phases.ts or
 * update.ts over the step's StepBatch):
 *
 *   [validate]                                     trainer.val_before_train
 *   for step in start+1 .. total_steps:
 *     items   = dataset.next(train_batch_size)     shuffled env instances with their seeds
 *     batch   = rollout(items, n)                  episodes -> rows: ids, masks, scores, engine log-probs
 *     old     = actor log-probs (or the engine's, when exactly on-policy)
 *     ref     = reference log-probs                only when a KL term reads them
 *     values  = critic values                      only with a critic
 *     is, loss mask = rollout correction           π_old / π_rollout, truncated; rejection
 *     rewards = scores (− β·KL in reward)
 *     adv, returns = estimator(rewards, values)
 *     batch   = filter(batch)                      by the scores' variance per group
 *     critic update; actor update once step >= critic_warmup
 *     metrics -> metrics.jsonl + TensorBoard; rollouts/ and batches/ dumps
 *     validate every test_freq; checkpoint every save_freq; both at the end
 *
 * Interrupts (the signal): before the updates a step is abandoned (its data position,
 * RNG and KL coefficient restored, so a resumed run takes the same step); once the
 * updates begin the step is finished; either way the last finished step is saved.
 *
 * `runTraining` is a function of a checked config that emits typed events and returns;
 * the CLI (and `vagen demo`) choose how to show them.
 */
import { existsSync, mkdirSync, readFileSync, renameSync, rmSync, statSync } from "node:fs";
import { join } from "node:path";
import YAML from "yaml";
import * as torch from "../torch/index.ts";
import type { Tensor } from "../torch/index.ts";
import { createKlController, type KlController } from "../algorithms/index.ts";
import { redactSecrets } from "../config/index.ts";
import { writeRunPlots } from "../core/plot/index.ts";
import { VagenError } from "../core/errors.ts";
import { Rng } from "../core/rng.ts";
import type { Env } from "../../envs/_common/types.ts";
import { createEnv } from "../../envs/registry.ts";
import { createHarness } from "../harness/registry.ts";
import type { EngineStats } from "../engine/index.ts";
import type { RolloutEpisode, RolloutItem } from "../rollout/index.ts";
import { judgeTrouble } from "../rewards/index.ts";
import {
  latestReadableCheckpoint,
  loadPart,
  readTrainerState,
  removeStaleCheckpointTemporaries,
  restoreTorchRng,
  saveCheckpoint,
  torchRngHex,
  type ModelPart,
  type TrainerState,
} from "./checkpoint.ts";
import type { CheckedTrainConfig, TrainConfig } from "./config.ts";
import { EnvDataset, datasetItems, type DatasetItem } from "./dataset.ts";
import type { TrainEvent, TrainEventListener, TrainPhase } from "./events.ts";
import { disposeModels, loadModels, nonFiniteWeights, type Models } from "./models.ts";
import { droppedSummary, dumpBatch, dumpEpisodes, MetricsLog, writeResolvedConfig } from "./outputs.ts";
import {
  actorLogprobOptions,
  advantages,
  columnStats,
  correctRollout,
  criticValues,
  envMetrics,
  filterGroups,
  modelLogprobs,
  oldLogprobs,
  rewardsWithKl,
} from "./phases.ts";
import { checkResponseFormats } from "./preflight.ts";
import { checkPromptBudget } from "./prompt-budget.ts";
import { checkRewards, noRowsError, rollout, type Rollout } from "./rollout-phase.ts";
import { openRunLoggers, planLoggers, type RunLoggers } from "./loggers/index.ts";
import { anyRank, exchange, mergeRollouts, toWireRollout } from "./data-parallel.ts";
import { SINGLE_RANK, type RankContext } from "./ranks.ts";
import { acquireRunLock } from "./run-lock.ts";
import { resetStepMemory, stepMemory } from "./memory.ts";
import { prepareStateRewards, rewardedEnvFactory, StateRewardScorers } from "./state-rewards.ts";
import { StepBatch } from "./step-batch.ts";
import { updateActor, updateCritic } from "./update.ts";
import { Watchdog } from "./watchdog.ts";

export interface TrainOptions {
  onEvent?: TrainEventListener;
  /**
   * Aborting stops the run: a step not yet in its updates is abandoned, one in its
   * updates is finished; a checkpoint of the last finished step is saved.
   */
  signal?: AbortSignal;
  /** Stop after this many steps in this process (a run in parts; the next part resumes). */
  maxStepsThisRun?: number;
  /** Builds an episode's env (default: the env registry). */
  createEnv?: (item: RolloutItem) => Promise<Env>;
  /** Data parallel: this process's rank in the run's process group (default: one process). */
  ranks?: RankContext;
}

export interface TrainResult {
  step: number;
  reason: "completed" | "interrupted" | "stopped";
  checkpoint?: string;
  outputDir: string;
}

/** Thrown inside a step's early phases when an interrupt asks to abandon it. */
class StepAbandoned extends Error {
  constructor() {
    super("step abandoned");
  }
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

/** What a checkpoint's tensors mean: a resume under another model, dtype or critic setup is refused. */
function runIdentity(config: TrainConfig, models: Models): NonNullable<TrainerState["run"]> {
  const { spec } = models.actor.family;
  return {
    modelDir: config.model.model_dir,
    dtype: config.model.dtype,
    critic: models.critic !== undefined,
    modelShape: { family: models.actor.family.family, layers: spec.numLayers, hidden: spec.hiddenSize, heads: spec.numHeads, kvHeads: spec.numKvHeads, vocab: spec.vocabSize },
  };
}

/** Leaves of a config as dotted keys, for telling a user what changed between run segments. */
function flatten(value: unknown, prefix = "", out: Record<string, string> = {}): Record<string, string> {
  if (value !== null && typeof value === "object" && !Array.isArray(value)) {
    for (const [k, v] of Object.entries(value)) flatten(v, prefix ? `${prefix}.${k}` : k, out);
  } else out[prefix] = JSON.stringify(value);
  return out;
}

/** Keys whose change between segments says nothing about the checkpoint's meaning. */
const SEGMENT_KEYS = new Set(["trainer.total_steps", "trainer.resume", "trainer.resume_allow_changes"]);

export async function runTraining(checked: CheckedTrainConfig, opts: TrainOptions = {}): Promise<TrainResult> {
  const { trainer } = checked.config;
  const emit = (e: TrainEvent) => opts.onEvent?.(e);
  const outputDir = trainer.output_dir;
  const ckptRoot = join(outputDir, "checkpoints");
  if (existsSync(outputDir) && !statSync(outputDir).isDirectory()) {
    throw new VagenError(`${checked.file}: key "trainer.output_dir": ${outputDir} is a file, expected a directory (or a path that does not exist yet)`);
  }
  mkdirSync(outputDir, { recursive: true });
  // One run per folder: a second run would mix its metrics and checkpoints into this one's.
  // Data parallel: rank 0 writes the folder and holds the lock for all.
  const lock = (opts.ranks?.rank ?? 0) === 0 ? acquireRunLock(outputDir) : undefined;
  try {
    return await trainInFolder(checked, opts, emit, ckptRoot);
  } finally {
    lock?.release();
  }
}

async function trainInFolder(checked: CheckedTrainConfig, opts: TrainOptions, emit: (e: TrainEvent) => void, ckptRoot: string): Promise<TrainResult> {
  const { config, estimator, useCritic, useReference } = checked;
  const { trainer, data, rollout: rolloutCfg, actor: actorCfg, critic: criticCfg } = config;
  const outputDir = trainer.output_dir;
  const ranks = opts.ranks ?? SINGLE_RANK;
  /**
   * Data parallel: a process group, of any size (a torchrun launch of one rank runs the
   * same exchanges and collectives as a larger one). Rank 0 alone writes files.
   */
  const dp = ranks.group !== undefined;
  const writer = ranks.rank === 0;
  if (writer) removeStaleCheckpointTemporaries(ckptRoot);

  // Where to resume from: decided before any model is loaded, so a bad path fails fast.
  let resumeFrom: string | undefined;
  let resumeState: TrainerState | undefined;
  if (trainer.resume === "auto") {
    const found = latestReadableCheckpoint(ckptRoot);
    for (const s of found.skipped) emit({ type: "warning", step: 0, code: "checkpoint_unreadable", message: `skipping ${s.path}: ${s.reason}` });
    if (found.skipped.length && !found.path) throw new VagenError(`${ckptRoot}: no readable checkpoint (${found.skipped.length} damaged)`, "resume from a path (trainer.resume=PATH) or start afresh (trainer.resume=never)");
    resumeFrom = found.path;
    resumeState = found.state;
  } else if (trainer.resume !== "never") {
    if (!existsSync(join(trainer.resume, "state.json"))) throw new VagenError(`${checked.file}: key "trainer.resume": ${trainer.resume} is not a complete checkpoint (no state.json)`);
    resumeFrom = trainer.resume;
    resumeState = readTrainerState(resumeFrom);
  }
  if (resumeState && resumeState.step > trainer.total_steps) {
    throw new VagenError(`${checked.file}: key "trainer.total_steps": got ${trainer.total_steps}, but the checkpoint ${resumeFrom} is at step ${resumeState.step}`, "raise trainer.total_steps, or start afresh (trainer.resume=never)");
  }
  const previousConfig = resumeFrom && existsSync(join(outputDir, "config.yaml")) ? (YAML.parse(readFileSync(join(outputDir, "config.yaml"), "utf8")) as unknown) : undefined;

  // World-model rewards: split off, validated and checked against their envs before any model loads.
  const makeEnv = (name: string, envConfig: Record<string, unknown>) =>
    opts.createEnv ? opts.createEnv({ env: name, config: envConfig, seed: 0 }) : createEnv(name, envConfig);
  const setups = await prepareStateRewards(data, checked.file, makeEnv);
  // W&B's key and the Hub's token are checked here, before any model loads.
  const loggerPlan = planLoggers(checked);

  torch.manualSeed(trainer.seed);
  const harness = await createHarness(trainer.harness);
  // Data parallel on CUDA: each rank on the GPU its placement gave it (rankPlacement), by default cuda:LOCAL_RANK.
  const rankDevice = dp && config.model.device === "cuda" && ranks.group ? (ranks.device ?? `cuda:${ranks.group.localRank}`) : config.model.device;
  // The gradient buckets' size: the reducer's, and ZeRO deals parameters to owners within them.
  const ddpBucketBytes = Math.round(trainer.ddp_bucket_mb * 1024 * 1024);
  const models = loadModels({ ...config, model: { ...config.model, device: rankDevice as TrainConfig["model"]["device"] } }, useCritic, useReference, config.trainer.zero_stage > 0 ? { ...ranks, zeroStage: config.trainer.zero_stage as 1 | 2, bucketBytes: ddpBucketBytes } : undefined);
  let stateRewards: StateRewardScorers;
  try {
    const { family } = models.actor;
    stateRewards = new StateRewardScorers(setups, { tokenBytes: family.tokenizer.tokenBytes(), decode: (ids) => family.decode(ids) });
    // One episode of each train spec, at its first seed, checked before the first step.
    const firstItems = new Map<string, DatasetItem>();
    for (const item of datasetItems(data.train, data.base_seed, "data.train")) if (!firstItems.has(item.tag)) firstItems.set(item.tag, item);
    const probes = [...firstItems.values()].map((item) => {
      const setup = setups.train.get(item.tag)!;
      const create = rewardedEnvFactory(setup, () => (opts.createEnv ? opts.createEnv({ env: item.spec.name, config: setup.envConfig, seed: item.seed }) : createEnv(item.spec.name, setup.envConfig)));
      return { key: `${checked.file}: key "data.train.${item.tag}"`, seed: item.seed, create: () => create(undefined) };
    });
    await checkResponseFormats(probes, { encode: (text) => models.actor.family.tokenizer.encode(text), decode: (ids) => models.actor.family.decode(ids) });
    await checkPromptBudget(probes, models.actor.family, data.max_prompt_length);
    if (resumeState) checkResumeCompatible(checked, resumeState, runIdentity(config, models), previousConfig, emit);
  } catch (err) {
    await disposeModels(models);
    throw err;
  }
  // Each segment's config is kept (config.yaml is the newest; config-history/ has every start).
  if (writer) {
    writeResolvedConfig(outputDir, config);
    writeResolvedConfig(join(outputDir, "config-history"), config, `from_step_${resumeState?.step ?? 0}.yaml`);
  }

  const dataset = new EnvDataset(datasetItems(data.train, data.base_seed, "data.train"), { shuffle: data.shuffle, seed: trainer.seed });
  const valItems = datasetItems(data.val, data.base_seed, "data.val");
  let kl: KlController = createKlController(config.algorithm.kl_ctrl);
  let startStep = 0;
  let bestValReward: number | null = null;

  if (resumeFrom && resumeState) {
    const state = resumeState;
    const actorOpt = loadPart(join(resumeFrom, "actor"), models.actor.weights);
    models.actorOptim.loadStateDict(actorOpt);
    for (const t of actorOpt.tensors.values()) t.dispose();
    models.actorOptim.scheduler.setStep(state.actorSchedulerStep);
    if (models.critic) {
      const criticOpt = loadPart(join(resumeFrom, "critic"), models.critic.named);
      models.critic.optim.loadStateDict(criticOpt);
      for (const t of criticOpt.tensors.values()) t.dispose();
      models.critic.optim.scheduler.setStep(state.criticSchedulerStep ?? 0);
    }
    if (state.data.cursor > dataset.items.length) {
      emit({ type: "warning", step: state.step, code: "dataset_changed", message: `the checkpoint's data position (item ${state.data.cursor} of epoch ${state.data.epoch}) is past the ${dataset.items.length} items of data.train: the run continues with the next epoch` });
    }
    dataset.seek(state.data);
    restoreTorchRng(state.torchRngState);
    // An adaptive controller continues from the coefficient it had reached.
    kl = createKlController({ ...config.algorithm.kl_ctrl, kl_coef: state.klCoef });
    bestValReward = state.bestValReward;
    startStep = state.step;
  }

  const metricsLog = writer ? new MetricsLog(outputDir, resumeFrom ? startStep : undefined) : undefined;
  const loggers = writer ? openRunLoggers(loggerPlan, { resumed: resumeFrom !== undefined, emit }) : silentLoggers();
  const watchdog = new Watchdog(trainer.watchdog_s);
  const ctx = { config, harness, client: models.client, setups, stateRewards, createEnv: opts.createEnv, signal: opts.signal };
  const interrupted = () => opts.signal?.aborted === true;
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

  const identity = runIdentity(config, models);
  const state = (step: number): TrainerState => ({
    step,
    data: dataset.position,
    actorSchedulerStep: models.actorOptim.scheduler.lastStep,
    criticSchedulerStep: models.critic?.optim.scheduler.lastStep,
    klCoef: kl.value,
    bestValReward,
    torchRngState: torchRngHex(),
    run: identity,
  });
  /** The models' parts of a checkpoint (under ZeRO every rank gathers the optimizer state with the others); `dispose` frees the gathered copies. */
  const parts = (): { actor: ModelPart; critic?: ModelPart; dispose(): void } => {
    const actorState = models.actorOptim.stateDict();
    const criticState = models.critic?.optim.stateDict();
    return {
      actor: { weights: models.actor.weights, optimizer: actorState },
      ...(models.critic && criticState ? { critic: { weights: models.critic.named, optimizer: criticState } } : {}),
      dispose: () => {
        actorState.dispose();
        criticState?.dispose();
      },
    };
  };
  /** Refuses to write weights that hold NaN or infinity: a checkpoint must be a state worth resuming. */
  const requireFiniteWeights = (step: number): void => {
    const bad = [...nonFiniteWeights(models.actor.weights), ...(models.critic ? nonFiniteWeights(models.critic.named) : [])];
    if (bad.length) {
      throw new VagenError(
        `after step ${step} the weights hold NaN or infinite values (${bad.join(", ")}): nothing was saved`,
        `the training diverged (a learning rate too high?); ${lastCheckpoint ? `the last finite checkpoint is ${lastCheckpoint}` : "no checkpoint was written before"}`,
      );
    }
  };
  let lastCheckpoint: string | undefined = resumeFrom;
  const checkpoint = (step: number): void => {
    requireFiniteWeights(step);
    const t0 = performance.now();
    const written = parts();
    try {
      lastCheckpoint = writer ? saveCheckpoint(ckptRoot, written, state(step), trainer.keep_checkpoints) : join(ckptRoot, `step_${step}`);
    } finally {
      written.dispose();
    }
    emit({ type: "checkpoint_saved", step, path: lastCheckpoint, seconds: (performance.now() - t0) / 1000, bestActor: false });
    loggers.checkpointSaved(step, lastCheckpoint);
  };

  let validations = 0;
  let localVal: Rollout | undefined;
  /** A validation pass; undefined when an interrupt cut it short (nothing of it counts). */
  const validate = async (step: number): Promise<Record<string, number> | undefined> => {
    if (valItems.length === 0) return {};
    let val: Rollout;
    try {
      val = await watchdog.guard("validation", "validation episodes", () =>
        rollout(ctx, valItems, {
          split: "val",
          step,
          n: rolloutCfg.val_kwargs.n,
          temperature: rolloutCfg.val_kwargs.temperature,
          topP: rolloutCfg.val_kwargs.top_p,
          onEpisode: (e, tag) => emit(episodeEvent(step, "val", e, tag)),
          ...(dp ? { shard: ranks } : {}),
        }),
      );
    } catch (err) {
      if (!interrupted()) throw err;
      if (!dp) return undefined;
      val = { rows: [], episodes: [], tags: new Map(), stateRewardMetrics: {} };
    }
    if (dp) {
      const parts = exchange(ranks, `val/${step}/${validations++}`, { ...toWireRollout(val), abandoned: interrupted() });
      if (parts.some((p) => p.abandoned)) return undefined;
      localVal = val;
      val = mergeRollouts(val, parts, Object.keys(data.val));
    } else if (interrupted()) return undefined;
    checkRewards(val.episodes, val.tags);
    // Episodes that could not run (an env or the engine failed) are not a score of 0: they
    // are counted, left out of the means, and keep this validation from choosing best_actor.
    const failed = val.episodes.filter((e) => e.record.error !== undefined);
    const ran = val.episodes.filter((e) => e.record.error === undefined);
    const metrics: Record<string, number> = { ...envMetrics("val", ran, val.tags), ...val.stateRewardMetrics };
    const tags = Object.keys(data.val);
    for (const tag of tags) metrics[`val/${tag}/failed_episodes`] = failed.filter((e) => val.tags.get(e) === tag).length;
    if (failed.length) {
      const first = failed[0]!.record.error!;
      emit({ type: "warning", step, code: "validation_failed_episodes", message: `${failed.length} of ${val.episodes.length} validation episode(s) could not run (first: ${first.kind}: ${first.message}); they are left out of the means and best_actor is not chosen from this validation` });
    }
    const scored = tags.filter((t) => metrics[`val/${t}/mean_reward`] !== undefined);
    const meanReward = scored.length ? scored.reduce((s, t) => s + metrics[`val/${t}/mean_reward`]!, 0) / scored.length : 0;
    const best = trainer.save_best_actor && failed.length === 0 && scored.length === tags.length && (bestValReward === null || meanReward > bestValReward);
    if (best) {
      requireFiniteWeights(step);
      bestValReward = meanReward;
      const t0 = performance.now();
      const path = writer ? saveBestActor(outputDir, models.actor.weights) : join(outputDir, "best_actor");
      emit({ type: "checkpoint_saved", step, path, seconds: (performance.now() - t0) / 1000, bestActor: true });
    }
    // the validation table shows episodes with their transcripts: rank 0's own under data parallelism
    loggers.validation(step, dp ? (localVal?.episodes ?? []).filter((e) => e.record.error === undefined) : ran, dp ? (localVal?.tags ?? val.tags) : val.tags);
    emit({ type: "validation", step, metrics, meanReward, best });
    return metrics;
  };

  let step = startStep;
  let reason: TrainResult["reason"] = "completed";
  let nonFiniteStreak = 0;
  try {
    if (trainer.val_before_train && startStep === 0) {
      const metrics = await validate(0);
      if (metrics === undefined) reason = "interrupted";
      else if (Object.keys(metrics).length) {
        metricsLog?.append(0, metrics);
        loggers.scalars(0, metrics);
      }
    }
    const lastStep = opts.maxStepsThisRun === undefined ? trainer.total_steps : Math.min(trainer.total_steps, startStep + opts.maxStepsThisRun);
    while (reason === "completed" && step < lastStep) {
      // data parallel: the end of the previous step decided for all ranks together
      if (!dp && interrupted()) {
        reason = "interrupted";
        break;
      }
      const current = step + 1;
      emit({ type: "step_started", step: current, totalSteps: trainer.total_steps });
      const stepStart = performance.now();
      resetStepMemory(rankDevice);
      const timer = new Timer(current, emit, watchdog);
      const metrics: Record<string, number> = {};
      const rng = new Rng(trainer.seed, current);
      // What an abandoned step puts back, so that a resumed run takes this very step.
      const before = { data: dataset.position, rng: torchRngHex(), klCoef: kl.value };
      // Data parallel: ranks decide together at the rollout's end and before the updates
      // (one rank abandoning alone would leave the others waiting in a collective).
      const abandonIfInterrupted = () => {
        if (!dp && interrupted()) throw new StepAbandoned();
      };
      const abandonTogether = (where: string) => {
        if (dp ? anyRank(ranks, `step/${current}/${where}`, interrupted()) : interrupted()) throw new StepAbandoned();
      };

      let roll: Rollout;
      /** This rank's own rollout (all of it without data parallelism): what it can dump. */
      let localRoll: Rollout = { rows: [], episodes: [], tags: new Map(), stateRewardMetrics: {} };
      let batch: StepBatch | undefined;
      let trainBatch: StepBatch | undefined;
      try {
        // ---- rollout ----
        const items = dataset.next(data.train_batch_size);
        let done = 0;
        const total = items.length * rolloutCfg.n;
        const engineBefore = models.engine.engine.stats();
        roll = await timer
          .phase("rollout", "gen", () =>
            rollout(ctx, items, {
              split: "train",
              step: current,
              n: rolloutCfg.n,
              temperature: rolloutCfg.temperature,
              topP: rolloutCfg.top_p,
              onEpisode: (e, tag) => {
                watchdog.touch();
                emit(episodeEvent(current, "train", e, tag));
                emit({ type: "phase_progress", step: current, phase: "rollout", done: ++done, total });
              },
              ...(dp ? { shard: ranks } : {}),
            }), "episodes to finish (env steps and generation)")
          .catch((err: unknown): Rollout => {
            // Ctrl-C during the rollout cancels its episodes; that is an interruption, not a failure.
            if (!interrupted()) throw err;
            if (!dp) throw new StepAbandoned();
            return { rows: [], episodes: [], tags: new Map(), stateRewardMetrics: {} };
          });
        localRoll = roll;
        Object.assign(metrics, engineWork(engineBefore, models.engine.engine.stats()));
        if (dp) {
          // every rank gets the whole step's rows (without the others' images) in one process's order
          const parts = exchange(ranks, `step/${current}/rollout`, { ...toWireRollout(roll), abandoned: interrupted() });
          if (parts.some((p) => p.abandoned)) throw new StepAbandoned();
          roll = mergeRollouts(roll, parts, [...new Set(items.map((i) => i.tag))]);
        }
        abandonIfInterrupted();
        checkRewards(roll.episodes, roll.tags);
        if (roll.rows.length === 0) {
          if (writer) writeEpisodeDumps(config, current, localRoll, Math.max(1, trainer.log_episodes), "dropped");
          throw noRowsError(current, roll.episodes);
        }
        batch = StepBatch.fromRows(roll.rows, models.actor.device);

        // ---- old and reference log-probs, values ----
        const oldSource = rolloutCfg.use_engine_logprobs && roll.rows.every((r) => r.logprobsComplete) ? "engine" : "actor";
        // data parallel: each rank runs the rows it played, the columns are exchanged
        const column = (name: string) => (dp ? { dp: { ranks, key: `step/${current}/${name}` } } : {});
        if (oldSource === "engine") await oldLogprobs(models, batch, config);
        else await timer.phase("old_logprobs", "old_log_prob", () => oldLogprobs(models, batch!, config, abandonIfInterrupted, column("old").dp), "the actor's forward");
        if (models.reference) {
          const ref = models.reference;
          batch.set("refLogprobs", await timer.phase("ref_logprobs", "ref", () => modelLogprobs(ref, batch!, { ...actorLogprobOptions(config), ...column("ref") }, abandonIfInterrupted), "the reference forward"));
        }
        if (models.critic) {
          const c = models.critic;
          const opts = { microBatchSize: criticCfg.ppo_micro_batch_size, ...(criticCfg.use_dynamic_bsz ? { maxTokens: criticCfg.ppo_max_token_len } : {}), ...column("values") };
          batch.set("values", await timer.phase("values", "values", () => criticValues(c.model, c.head, batch!, opts, abandonIfInterrupted), "the critic's forward"));
        }

        // ---- rollout correction, rewards, advantages, filter ----
        const filtered = await timer.phase("advantages", "adv", () => {
          Object.assign(metrics, correctRollout(batch!, config));
          Object.assign(metrics, rewardsWithKl(batch!, config, kl));
          advantages(batch!, estimator);
          const f = filterGroups(batch!, config);
          Object.assign(metrics, f.metrics);
          return f.kept;
        }, "the estimator");
        trainBatch = filtered;
        abandonTogether("before-updates");
      } catch (err) {
        if (trainBatch !== batch) trainBatch?.dispose();
        batch?.dispose();
        if (!(err instanceof StepAbandoned)) throw err;
        dataset.seek(before.data);
        restoreTorchRng(before.rng);
        kl = createKlController({ ...config.algorithm.kl_ctrl, kl_coef: before.klCoef });
        emit({ type: "warning", step: current, code: "step_abandoned", message: `step ${current} abandoned before its updates; the run resumes with it` });
        reason = "interrupted";
        break;
      }

      try {
        // ---- updates (never abandoned half-way: an interrupt from here on finishes the step) ----
        const miniCount = (cfg: { ppo_mini_batch_size: number }) => data.train_batch_size / cfg.ppo_mini_batch_size;
        const batching = (cfg: typeof actorCfg | typeof criticCfg) => ({
          miniBatches: miniCount(cfg),
          microBatchSize: cfg.ppo_micro_batch_size,
          maxTokens: cfg.use_dynamic_bsz ? cfg.ppo_max_token_len : undefined,
          epochs: cfg.ppo_epochs,
          shuffle: cfg.shuffle,
          lossAggMode: cfg.loss_agg_mode,
          tokenSumNorm: cfg.loss_scale_factor ?? data.max_response_length,
          gradClip: cfg.grad_clip,
          ...(dp ? { ranks, ddpBucketBytes } : {}),
        });
        if (models.critic) {
          const c = models.critic;
          Object.assign(metrics, await timer.phase("critic_update", "update_critic", () =>
            updateCritic(c.model, c.head, c.optim, trainBatch!, { ...batching(criticCfg), cliprangeValue: criticCfg.cliprange_value }, rng), "the critic update"));
        }
        if (trainer.critic_warmup <= current) {
          Object.assign(metrics, await timer.phase("actor_update", "update_actor", () =>
            updateActor(models.actor, models.actorOptim, trainBatch!, {
              ...batching(actorCfg),
              temperature: rolloutCfg.temperature,
              chunkTokens: actorCfg.logprob_chunk_tokens,
              lossMode: actorCfg.policy_loss.loss_mode,
              clipRatio: actorCfg.clip_ratio,
              clipRatioLow: actorCfg.clip_ratio_low ?? undefined,
              clipRatioHigh: actorCfg.clip_ratio_high ?? undefined,
              clipRatioC: actorCfg.clip_ratio_c,
              entropyCoeff: actorCfg.entropy_coeff,
              klLoss: actorCfg.use_kl_loss ? { coef: actorCfg.kl_loss_coef, type: actorCfg.kl_loss_type } : undefined,
            }, rng), "the actor update"));
        }

        // ---- non-finite losses and gradients ----
        const nonFinite = (metrics["actor/skipped_steps"] ?? 0) + (metrics["critic/skipped_steps"] ?? 0) > 0 || ["actor/pg_loss", "critic/vf_loss"].some((k) => k in metrics && !Number.isFinite(metrics[k]!));
        nonFiniteStreak = nonFinite ? nonFiniteStreak + 1 : 0;
        metrics["train/nonfinite_steps_in_a_row"] = nonFiniteStreak;
        if (nonFiniteStreak === 1) emit({ type: "warning", step: current, code: "nonfinite_update", message: `step ${current}: a loss or gradient norm is NaN or infinite; its optimizer steps were skipped (the run stops after ${trainer.max_nonfinite_steps} such steps in a row)` });
        if (nonFiniteStreak >= trainer.max_nonfinite_steps) {
          throw new VagenError(
            `training diverged: ${nonFiniteStreak} step(s) in a row up to step ${current} had NaN or infinite losses or gradients (trainer.max_nonfinite_steps = ${trainer.max_nonfinite_steps})`,
            `lower actor.optim.lr or check the rewards; ${lastCheckpoint ? `the last finite checkpoint is ${lastCheckpoint}` : "no checkpoint was written"}`,
          );
        }

        // ---- metrics ----
        Object.assign(metrics, stepMetrics(batch!, roll, trainBatch!));
        for (const w of troubleSigns(metrics)) emit({ type: "warning", step: current, ...w });
        if (writer && localRoll.episodes.length && trainer.log_episodes > 0) writeEpisodeDumps(config, current, localRoll, trainer.log_episodes);
        if (writer && trainer.dump_batches) {
          const meta = { estimator: estimator.spec.name, step: current, ...dumpedParams(estimator) };
          dumpBatch(join(outputDir, "batches"), current, meta, batch!.rows, {
            tokenRewards: batch!.hostRows("tokenRewards"),
            values: batch!.has("values") ? batch!.hostRows("values") : undefined,
            oldLogprobs: batch!.hostRows("oldLogprobs"),
            refLogprobs: batch!.has("refLogprobs") ? batch!.hostRows("refLogprobs") : undefined,
            advantages: batch!.hostRows("advantages"),
            returns: batch!.hostRows("returns"),
          });
        }
      } finally {
        if (trainBatch !== batch) trainBatch?.dispose();
        batch?.dispose();
      }

      // ---- validation (skipped once an interrupt came in: the step is done, the run stops) ----
      // data parallel: whether the run stops after this step is decided by all ranks together
      const stopping = dp ? anyRank(ranks, `step/${current}/stop`, interrupted()) : interrupted();
      if (!stopping && trainer.test_freq > 0 && (current % trainer.test_freq === 0 || current === trainer.total_steps)) {
        const val = await timer.phase("validation", "testing", () => validate(current), "validation episodes");
        if (val) Object.assign(metrics, val);
      }
      Object.assign(metrics, timer.timings);
      const stepSeconds = (performance.now() - stepStart) / 1000;
      metrics["timing_s/step"] = stepSeconds;
      metrics["perf/generation_share"] = (timer.timings["timing_s/gen"] ?? 0) / stepSeconds;
      Object.assign(metrics, stepMemory(rankDevice, ranks, `step/${current}/memory`));
      step = current;
      Object.assign(metrics, loggers.metrics());
      metricsLog?.append(step, metrics);
      loggers.scalars(step, metrics);
      emit({ type: "metrics", step, metrics });

      // ---- checkpoint ----
      if ((trainer.save_freq > 0 && step % trainer.save_freq === 0) || (trainer.save_at_end && step === trainer.total_steps)) {
        await timer.phase("checkpoint", "save_checkpoint", () => checkpoint(step), "the checkpoint write");
      }
      emit({ type: "step_finished", step, totalSteps: trainer.total_steps, seconds: (performance.now() - stepStart) / 1000 });
      if (stopping) reason = "interrupted";
    }
    if (reason === "completed" && step < trainer.total_steps) reason = "stopped";
    if (reason === "interrupted" && step > startStep && !lastCheckpoint?.endsWith(`step_${step}`)) checkpoint(step);
    if (writer && step > 0) {
      // The learning curves as a picture beside the metrics (also `vagen monitor RUN --png`).
      try {
        writeRunPlots(outputDir, join(outputDir, "plots.png"), { title: outputDir });
      } catch (err) {
        emit({ type: "warning", step, code: "plots", message: `could not draw ${join(outputDir, "plots.png")}: ${(err as Error).message}` });
      }
    }
    await loggers.close(step, reason === "interrupted" ? 255 : 0);
    emit({ type: "run_finished", step, reason: reason === "interrupted" ? "interrupted" : "completed", ...(lastCheckpoint ? { checkpoint: lastCheckpoint } : {}) });
    return { step, reason, checkpoint: lastCheckpoint, outputDir };
  } catch (err) {
    const watchdogEnd = err instanceof VagenError && err.message.startsWith("watchdog:");
    await loggers.close(step, 1);
    emit({ type: "run_finished", step, failedStep: step + 1, reason: watchdogEnd ? "watchdog" : "failed", error: (err as Error).message, ...(lastCheckpoint ? { checkpoint: lastCheckpoint } : {}) });
    throw err;
  } finally {
    watchdog.dispose();
    await disposeModels(models);
  }
}

/** The loggers of a rank that writes nothing (data parallel ranks above 0). */
function silentLoggers(): RunLoggers {
  return { scalars() {}, validation() {}, checkpointSaved() {}, metrics: () => ({}), close: async () => {} };
}

function episodeEvent(step: number, split: "train" | "val", e: RolloutEpisode, tag: string): TrainEvent {
  return { type: "episode_finished", step, split, env: tag, episodeId: e.episodeId, seed: e.item.seed, reward: e.record.totalReward, success: e.rows[0]?.success ?? false, turns: e.record.turns.length, ...(e.record.error ? { error: e.record.error.message } : {}) };
}

/** rollouts/step_N/: the first `count` episodes (or the first dropped ones, with their errors). */
function writeEpisodeDumps(config: TrainConfig, step: number, roll: Rollout, count: number, select: "first" | "dropped" = "first"): void {
  const ctx = { tags: roll.tags, model: config.model.model_dir, maxTurns: (tag: string) => config.data.train[tag]?.max_turns ?? Number.NaN };
  dumpEpisodes(join(config.trainer.output_dir, "rollouts", `step_${step}`), roll.episodes, count, ctx, select);
}

/**
 * A resumed run must mean the same tensors: another model shape, dtype or critic setup
 * is refused (unless trainer.resume_allow_changes); any other changed key is named in a
 * warning.
 */
function checkResumeCompatible(checked: CheckedTrainConfig, saved: TrainerState, now: NonNullable<TrainerState["run"]>, previousConfig: unknown, emit: (e: TrainEvent) => void): void {
  const allow = checked.config.trainer.resume_allow_changes;
  if (saved.run) {
    const breaking: string[] = [];
    if (JSON.stringify(saved.run.modelShape) !== JSON.stringify(now.modelShape)) breaking.push(`the model (${JSON.stringify(saved.run.modelShape)} -> ${JSON.stringify(now.modelShape)})`);
    if (saved.run.dtype !== now.dtype) breaking.push(`model.dtype (${saved.run.dtype} -> ${now.dtype})`);
    if (saved.run.critic !== now.critic) breaking.push(`the critic (${saved.run.critic ? "present" : "absent"} -> ${now.critic ? "present" : "absent"})`);
    if (breaking.length && !allow) {
      throw new VagenError(
        `${checked.file}: the checkpoint at step ${saved.step} was trained with another ${breaking.join(", ")}`,
        "resume with the run's own config, start afresh in another output_dir, or set trainer.resume_allow_changes=true",
      );
    }
  }
  if (previousConfig !== undefined) {
    const before = flatten(previousConfig);
    const after = flatten(redactSecrets(checked.config));
    const changed = [...new Set([...Object.keys(before), ...Object.keys(after)])].filter((k) => !SEGMENT_KEYS.has(k) && before[k] !== after[k] && before[k] !== '"[redacted]"');
    if (changed.length) {
      emit({ type: "warning", step: saved.step, code: "config_changed", message: `resuming step ${saved.step} with a changed config: ${changed.slice(0, 8).map((k) => `${k} (${before[k] ?? "unset"} -> ${after[k] ?? "unset"})`).join(", ")}${changed.length > 8 ? `, and ${changed.length - 8} more` : ""}` });
    }
  }
}

/** The step's batch, rollout and rows trained as verl's metric names. */
function stepMetrics(batch: StepBatch, roll: Rollout, trained: StepBatch): Record<string, number> {
  const rows = batch.rows;
  const metrics: Record<string, number> = {};
  Object.assign(metrics, summarize("critic/score", batch.rowSums("tokenScores")));
  Object.assign(metrics, summarize("critic/rewards", batch.rowSums("tokenRewards")));
  for (const [name, key] of [["advantages", "critic/advantages"], ["returns", "critic/returns"], ["values", "critic/values"]] as const) {
    if (!batch.has(name)) continue;
    const s = columnStats(batch, name);
    Object.assign(metrics, { [`${key}/mean`]: s.mean, [`${key}/max`]: s.max, [`${key}/min`]: s.min });
  }
  const sampled = rows.map((r) => r.responseMask.reduce((a, x) => a + x, 0));
  Object.assign(metrics, summarize("response_length", sampled));
  Object.assign(metrics, summarize("prompt_length", rows.map((r) => r.promptIds.length)));
  const responseTokens = rows.reduce((a, r) => a + r.responseIds.length, 0);
  metrics["rollout/loss_mask_coverage"] = responseTokens ? sampled.reduce((a, b) => a + b, 0) / responseTokens : 0;
  metrics["response_length/clip_ratio"] = rows.filter((r) => r.truncation !== "none").length / rows.length;
  const replies = roll.episodes.flatMap((e) => e.record.turns.map((t) => t.completion.text));
  metrics["rollout/degenerate_rate"] = replies.length ? replies.filter(isDegenerate).length / replies.length : 0;
  if (rows.every((r) => r.logprobsComplete)) {
    metrics["rollout/logprob_mismatch"] = torch.tidy(() => {
      const mask = batch.get("responseMask").ne(0);
      const diff = batch.get("oldLogprobs").sub(batch.get("rolloutLogprobs")).abs();
      return torch.where(mask, diff, 0).sum().item() / Math.max(1, mask.to({ dtype: "f64" }).sum().item());
    });
  }
  metrics["data/rows"] = rows.length;
  metrics["data/rows_trained"] = trained.size;
  const dropped = droppedSummary(roll.episodes).counts;
  metrics["data/dropped_episodes"] = Object.values(dropped).reduce((a, b) => a + b, 0);
  // Why, by reason (rows.ts: context_too_large, sampled_vision_token, model_error, ...), so
  // a run that loses episodes says which way without its rollouts at hand.
  for (const [reason, count] of Object.entries(dropped)) metrics[`data/dropped/${reason}`] = count;
  Object.assign(metrics, envMetrics("train", roll.episodes, roll.tags), roll.stateRewardMetrics);
  return metrics;
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

/** VAGEN's knobs every batch dump names, plus whatever else the estimator reads. */
const DUMPED_PARAMS = ["gamma", "lam", "gamma_turn", "lambda_turn", "lambda_token", "bi_level_mix", "high_level_gamma", "norm_adv_by_std_in_grpo"] as const;

function dumpedParams(estimator: CheckedTrainConfig["estimator"]): Record<string, unknown> {
  const names = new Set<keyof typeof estimator.params>([...DUMPED_PARAMS, ...estimator.spec.reads]);
  return Object.fromEntries([...names].map((k) => [k, estimator.params[k]]));
}

/**
 * Metrics that show trouble early, turned into warnings: the trainer's log-probs drifting
 * from the engine's (a weight or template mismatch), replies collapsing into empty or
 * repeated characters, most rows cut at the response budget, a world-model judge failing.
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
  const judge = judgeTrouble(m);
  if (judge) out.push(judge);
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

/**
 * What the engine did for a step's rollout: its forward calls (a prefill call runs the
 * newly admitted prompts, images included; a decode call one token for every generating
 * sequence) and the tokens through each. For a small policy each call costs about the
 * same whatever its size, so the calls, not the tokens, say where generation's time goes.
 */
function engineWork(before: EngineStats, after: EngineStats): Record<string, number> {
  return {
    "perf/engine_prefill_calls": after.prefillSteps - before.prefillSteps,
    "perf/engine_decode_calls": after.decodeSteps - before.decodeSteps,
    "perf/engine_prefill_tokens": after.prefillTokens - before.prefillTokens,
    "perf/engine_decode_tokens": after.decodeTokens - before.decodeTokens,
  };
}
