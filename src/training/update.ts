/**
 * The PPO update: the actor's and the critic's losses from src/algorithms over a step's
 * batch, in mini-batches (one optimizer step each) of micro-batches (one forward/backward
 * each, gradients accumulated), for ppo_epochs epochs, as verl's dp_actor / dp_critic.
 *
 *   for epoch in ppo_epochs:
 *     for mini in split(batch, n_mini, shuffled?):
 *       N = mini's masked tokens and rows            (counted before the split)
 *       for micro in mini (by count, or packed to a token budget):
 *         loss(micro; divided by N) -> backward       (the micro losses sum to mini's loss)
 *       clip_grad_norm(grad_clip); optimizer.step() (skipped on a non-finite norm)
 *   scheduler.step()     # once per training step, as verl
 *
 * Because every micro-batch's loss is divided by the whole mini-batch's counts, a
 * mini-batch's gradient is the same for any micro-batch size or token budget, in every
 * loss_agg_mode, and on any number of ranks: data parallel, each mini-batch's rows are
 * dealt to the ranks by token count, whole groups (balanceGroups); each rank
 * backpropagates its share, and the gradients are summed over the ranks, in buckets while
 * the last micro-batch's backward runs (GradientReducer) or after it (ddpBucketBytes 0).
 * Between micro-batches the update yields to the event loop, so a signal handler runs
 * while a long update is in flight.
 */
import * as torch from "../torch/index.ts";
import { optim, type Tensor } from "../torch/index.ts";

const { AdamW, LRScheduler, clipGradNorm, constantSchedule, warmupCosineSchedule } = optim;
import { aggregateLoss, klLoss, klPenalty, policyLoss, readMetrics, valueLoss, type KlPenalty, type LossAggMode, type LossNormalizer, type PolicyLossMode } from "../algorithms/index.ts";
import type { ModelFamily, ValueHead } from "../models/index.ts";
import type { TrainingRow } from "../rollout/types.ts";
import { Rng } from "../core/rng.ts";
import { policyForward, valueForward, type TrainingModel } from "./forward.ts";
import type { ColumnName, StepBatch } from "./step-batch.ts";
import { allReduceGradients, balanceGroups, lendRowImages, returnRowImages, rowTokens, sumOverRanks } from "./data-parallel.ts";
import { ZeroShards } from "./zero.ts";
import type { RankContext } from "./ranks.ts";
import { DEFAULT_BUCKET_BYTES, type GradientReducer, type ProcessGroup } from "../torch/distributed.ts";

export interface BatchingOptions {
  /** Mini-batches per epoch (train_batch_size / ppo_mini_batch_size). */
  miniBatches: number;
  /** Rows per micro-batch when packing by count. */
  microBatchSize: number;
  /** Pack micro-batches to a token budget instead (prompt + response tokens). */
  maxTokens?: number;
  epochs: number;
  shuffle: boolean;
  /**
   * Data parallel: this rank backpropagates its share of each mini-batch's rows (dealt by
   * token count), the gradients are summed over the ranks before the step, and the losses
   * over the ranks before they are logged (see data-parallel.ts).
   */
  ranks?: RankContext;
  /**
   * Data parallel: the gradient buckets' size in bytes, reduced while the backward runs
   * (trainer.ddp_bucket_mb; default 25 MiB); 0: one all-reduce after the last backward.
   */
  ddpBucketBytes?: number;
}

/** Row indices of each mini-batch of one epoch: a (seeded) permutation cut into equal parts. */
export function miniBatchPlan(rowCount: number, miniBatches: number, shuffle: boolean, rng: Rng): number[][] {
  const order = Array.from({ length: rowCount }, (_, i) => i);
  if (shuffle) {
    for (let i = order.length - 1; i > 0; i--) {
      const j = rng.int(i + 1);
      [order[i], order[j]] = [order[j]!, order[i]!];
    }
  }
  const parts = Math.max(1, Math.min(miniBatches, rowCount));
  const out: number[][] = [];
  for (let k = 0; k < parts; k++) out.push(order.slice(Math.floor((k * rowCount) / parts), Math.floor(((k + 1) * rowCount) / parts)));
  return out;
}

/**
 * Micro-batches of a mini-batch: `microBatchSize` rows each, or (with maxTokens) rows
 * packed greedily in order while the padded batch stays within the budget; a row larger
 * than the budget goes alone.
 */
export function microBatchPlan(indices: readonly number[], rows: readonly TrainingRow[], opts: Pick<BatchingOptions, "microBatchSize" | "maxTokens">): number[][] {
  const out: number[][] = [];
  if (opts.maxTokens === undefined) {
    for (let i = 0; i < indices.length; i += opts.microBatchSize) out.push(indices.slice(i, i + opts.microBatchSize));
    return out;
  }
  let current: number[] = [];
  let prompt = 0;
  let response = 0;
  for (const i of indices) {
    const row = rows[i]!;
    const p = Math.max(prompt, row.promptIds.length);
    const r = Math.max(response, row.responseIds.length);
    if (current.length > 0 && (current.length + 1) * (p + r) > opts.maxTokens) {
      out.push(current);
      current = [];
      prompt = row.promptIds.length;
      response = row.responseIds.length;
    } else {
      prompt = p;
      response = r;
    }
    current.push(i);
  }
  if (current.length) out.push(current);
  return out;
}

export interface OptimizerSettings {
  lr: number;
  weightDecay: number;
  betas: readonly [number, number];
  eps: number;
  /** Warmup steps (resolved: lr_warmup_steps, or ratio x total steps). */
  warmupSteps: number;
  style: "constant" | "cosine";
  minLrRatio: number;
  totalSteps: number;
  /** AdamW's state in host memory (optimizer_offload). */
  offload?: boolean;
}

/**
 * The weights an optimizer updates: all of `named`, or with `freezeVision` all but the
 * vision encoder's (`freeze_vision_tower`), which then keep the values they were loaded with.
 */
export function trainableWeights(named: Map<string, Tensor>, family: Pick<ModelFamily, "isVisionWeight">, freezeVision: boolean): Map<string, Tensor> {
  return freezeVision ? new Map([...named].filter(([name]) => !family.isVisionWeight(name))) : named;
}

/**
 * AdamW plus its schedule over a set of named parameters, with a checkpointable state.
 * With `zero` (a data-parallel run's ZeRO stage, `zero.zeroStage`, 1 when absent; see
 * zero.ts) AdamW holds the state of this rank's share of the parameters only, and under
 * stage 2 only that share keeps its reduced gradients; `params` are always all of them.
 */
export class ParameterOptimizer {
  readonly optimizer: optim.AdamW;
  readonly scheduler: optim.LRScheduler;
  readonly #all: Tensor[];
  readonly #shards?: ZeroShards;
  /** 0 without sharding, else the ZeRO stage. */
  readonly zeroStage: 0 | 1 | 2;
  #reducer?: { bucketBytes: number; group: ProcessGroup; reducer: GradientReducer };

  constructor(
    readonly named: Map<string, Tensor>,
    settings: OptimizerSettings,
    zero?: RankContext,
  ) {
    this.#all = [...named.values()];
    for (const p of this.#all) p.requiresGrad_(true);
    this.#shards = zero?.group !== undefined ? new ZeroShards(this.#all, zero) : undefined;
    this.zeroStage = this.#shards ? (zero!.zeroStage ?? 1) : 0;
    this.optimizer = new AdamW(this.#shards ? this.#shards.owned() : this.#all, { lr: settings.lr, weightDecay: settings.weightDecay, betas: settings.betas, eps: settings.eps, offload: settings.offload ?? false });
    const schedule =
      settings.style === "cosine"
        ? warmupCosineSchedule({ warmupSteps: settings.warmupSteps, totalSteps: settings.totalSteps, minLrRatio: settings.minLrRatio })
        : constantSchedule({ warmupSteps: settings.warmupSteps });
    this.scheduler = new LRScheduler(this.optimizer, schedule);
  }

  /** Every parameter (under ZeRO too; under stage 2 only the owned ones keep reduced gradients). */
  get params(): Tensor[] {
    return this.#all;
  }

  /**
   * The reducer that sums this optimizer's gradients over the ranks while the backward
   * runs (made on first use, kept while the group and bucket size stay; its hooks stay
   * on the parameters until dispose). Under stage 2 it keeps the owned gradients only.
   */
  gradientReducer(ranks: RankContext, bucketBytes: number): GradientReducer {
    const group = ranks.group!;
    const held = this.#reducer;
    if (held && held.group === group && held.bucketBytes === bucketBytes && !held.reducer.disposed) return held.reducer;
    held?.reducer.dispose();
    const owner = this.zeroStage === 2 ? this.#shards!.owner : undefined;
    const reducer = group.gradientReducer(this.#all, { bucketBytes, ...(owner ? { owner } : {}) });
    this.#reducer = { bucketBytes, group, reducer };
    return reducer;
  }

  /**
   * Sums the gradients over the ranks after the backward passes, in one coalesced
   * all-reduce (the unbucketed path); under stage 2 the other ranks' shares are then freed.
   */
  allReduceGradients(ranks: RankContext): void {
    allReduceGradients(ranks, this.#all);
    if (this.zeroStage === 2) this.#shards!.dropForeignGradients();
  }

  zeroGrad(): void {
    for (const p of this.params) {
      p.grad?.dispose();
      p.grad = undefined;
    }
  }

  /**
   * Clip, step; returns the gradient norm before clipping and whether the step was taken.
   * A non-finite norm means a bad batch: the step is skipped rather than poison the
   * weights (verl does the same); the caller counts skipped steps. Under ZeRO each rank
   * steps its share and the parameters are then broadcast from their owners.
   */
  step(gradClip: number): { gradNorm: number; skipped: boolean } {
    let value: number;
    if (this.zeroStage === 2) {
      value = this.#shards!.clipShardedGradients(gradClip);
    } else {
      const norm = clipGradNorm(this.params, gradClip);
      value = norm.item();
      norm.dispose();
    }
    const skipped = !Number.isFinite(value);
    if (!skipped) {
      this.optimizer.step();
      this.#shards?.broadcastParameters();
    }
    this.zeroGrad();
    return { gradNorm: value, skipped };
  }

  /**
   * The state a checkpoint holds: an unsharded AdamW's over all parameters (under ZeRO
   * gathered from the owners: every rank must call it). `dispose` frees what gathering made.
   */
  stateDict(): { tensors: Record<string, Tensor>; metadata: Record<string, string>; dispose(): void } {
    const local = this.optimizer.stateDict();
    return this.#shards ? this.#shards.gather(local) : { ...local, dispose: () => {} };
  }

  /** Loads a checkpoint's (unsharded) state; under ZeRO this rank keeps its share. */
  loadStateDict(state: { tensors: Map<string, Tensor> | Record<string, Tensor>; metadata: Record<string, string> }): void {
    this.optimizer.loadStateDict(this.#shards ? this.#shards.select(state) : state);
  }

  dispose(): void {
    // the hooks come off before the parameters stop requiring gradients
    this.#reducer?.reducer.dispose();
    this.#reducer = undefined;
    this.zeroGrad();
    for (const p of this.params) p.requiresGrad_(false);
    this.optimizer.dispose();
  }
}

/**
 * Metrics of an update, as verl logs them: each micro-batch's metric values averaged,
 * except the losses, which are summed over a mini-batch's micro-batches first (each
 * micro-batch's loss is its share of the mini-batch's), and counts, which are summed.
 */
class UpdateMetrics {
  #means = new Map<string, { sum: number; n: number }>();
  #mini = new Map<string, number>();
  #counts = new Map<string, number>();

  constructor(private readonly lossKeys: ReadonlySet<string>) {}

  micro(values: Record<string, number>): void {
    for (const [k, v] of Object.entries(values)) {
      if (this.lossKeys.has(k)) this.#mini.set(k, (this.#mini.get(k) ?? 0) + v);
      else this.#mean(k, v);
    }
  }

  /** The mini-batch's losses (this rank's share of them), to be summed over ranks. */
  miniLosses(): Record<string, number> {
    return Object.fromEntries(this.#mini);
  }

  endMini(values: Record<string, number>, losses: Record<string, number> = this.miniLosses()): void {
    for (const [k, v] of Object.entries(losses)) this.#mean(k, v);
    this.#mini.clear();
    for (const [k, v] of Object.entries(values)) this.#mean(k, v);
  }

  count(key: string, by: number): void {
    this.#counts.set(key, (this.#counts.get(key) ?? 0) + by);
  }

  #mean(k: string, v: number): void {
    const e = this.#means.get(k) ?? { sum: 0, n: 0 };
    e.sum += v;
    e.n += 1;
    this.#means.set(k, e);
  }

  result(): Record<string, number> {
    return { ...Object.fromEntries([...this.#means].map(([k, e]) => [k, e.sum / e.n])), ...Object.fromEntries(this.#counts) };
  }
}

export interface ActorUpdateOptions extends BatchingOptions {
  temperature: number;
  chunkTokens: number;
  lossMode: PolicyLossMode;
  lossAggMode: LossAggMode;
  /** seq-mean-token-sum-norm's constant (data.max_response_length unless configured). */
  tokenSumNorm: number;
  clipRatio: number;
  clipRatioLow?: number;
  clipRatioHigh?: number;
  clipRatioC: number;
  entropyCoeff: number;
  /** KL loss against the reference policy (needs the refLogprobs column). */
  klLoss?: { coef: number; type: KlPenalty };
  gradClip: number;
}

/** Lets the event loop run (signal handlers, timers) between two blocking libtorch calls. */
export function yieldToEventLoop(): Promise<void> {
  return new Promise((resolve) => setImmediate(resolve));
}

/**
 * The PPO update schedule both updates share: `epochs` passes over the batch, each split
 * into mini-batches (one optimizer step each), each split into micro-batches that see the
 * mini-batch's normalizer (counted over `maskColumn`) and accumulate gradients. Returns
 * the metrics (see UpdateMetrics) plus `<prefix>/grad_norm`, `<prefix>/lr` and
 * `<prefix>/skipped_steps` (optimizer steps skipped for a non-finite gradient norm).
 */
async function runUpdate(
  optimizer: ParameterOptimizer,
  batch: StepBatch,
  opts: BatchingOptions & { gradClip: number; tokenSumNorm: number },
  rng: Rng,
  prefix: "actor" | "critic",
  maskColumn: ColumnName,
  lossKeys: readonly string[],
  microStep: (micro: StepBatch, normalizer: LossNormalizer) => Record<string, number>,
): Promise<Record<string, number>> {
  const metrics = new UpdateMetrics(new Set(lossKeys));
  metrics.count(`${prefix}/skipped_steps`, 0);
  const ranks = opts.ranks?.group !== undefined ? opts.ranks : undefined;
  // Every epoch's mini-batches up front (the same draws of rng as planning them one by
  // one), so that the rows that move between ranks are known before the first backward.
  const plans = Array.from({ length: opts.epochs }, () => miniBatchPlan(batch.size, opts.miniBatches, opts.shuffle, rng));
  // Data parallel: each mini-batch's groups dealt to the ranks by token count (dealt[e][k][j]:
  // the rank of row j of epoch e's mini-batch k). Whole groups, not single rows: GRPO's
  // advantages sum to about zero over a group, so its gradient is mostly cancellation, and
  // a group summed inside one rank's backward cancels as in one process (row by row,
  // measured on the tiny fixture: 15,844 lm_head weights off by up to 2.3e-4 after one
  // step; by group, bit-equal). A group was played by one rank, so it moves with all its
  // images or none.
  const dealt = ranks ? plans.map((epoch) => epoch.map((mini) => balanceGroups(mini.map((i) => batch.rows[i]!), ranks.world))) : undefined;
  const borrowed = ranks ? lendRowImages(ranks, `update/${nextUpdateKey(ranks)}/images`, batch.rows, plans.flatMap((epoch, e) => epoch.flatMap((mini, k) => mini.map((row, j) => ({ row, rank: dealt![e]![k]![j]! }))))) : [];
  const bucketBytes = opts.ddpBucketBytes ?? DEFAULT_BUCKET_BYTES;
  const reducer = ranks && bucketBytes > 0 ? optimizer.gradientReducer(ranks, bucketBytes) : undefined;
  const rankTokens = new Array<number>(ranks?.world ?? 1).fill(0);
  try {
    for (const [e, epoch] of plans.entries()) {
      for (const [k, miniIndices] of epoch.entries()) {
        using mini = batch.select(miniIndices);
        const normalizer: LossNormalizer = { tokens: mini.tokenCount(maskColumn), rows: mini.rowCount(maskColumn), tokenSumNorm: opts.tokenSumNorm };
        const owners = dealt?.[e]![k];
        owners?.forEach((r, j) => (rankTokens[r]! += rowTokens(mini.rows[j]!)));
        const mine = mini.rows.map((_, i) => i).filter((i) => !owners || owners[i] === ranks!.rank);
        const micros = microBatchPlan(mine, mini.rows, opts);
        for (const [m, microIndices] of micros.entries()) {
          // buckets reduce during the last micro-batch's backward only (DDP's no_sync before it)
          reducer?.prepare(m === micros.length - 1);
          using micro = mini.select(microIndices);
          metrics.micro(microStep(micro, normalizer));
          await yieldToEventLoop();
        }
        let losses = metrics.miniLosses();
        if (ranks) {
          // a rank without rows in this mini-batch joins the sums with zeros
          if (reducer) reducer.finish();
          else optimizer.allReduceGradients(ranks);
          // every rank sends every loss key (0 where it had no rows), in one order
          losses = sumOverRanks(ranks, Object.fromEntries(lossKeys.map((key) => [key, losses[key] ?? 0])));
        }
        const { gradNorm, skipped } = optimizer.step(opts.gradClip);
        if (skipped) metrics.count(`${prefix}/skipped_steps`, 1);
        metrics.endMini({ [`${prefix}/grad_norm`]: gradNorm, [`${prefix}/lr`]: optimizer.optimizer.lr }, losses);
      }
    }
  } finally {
    returnRowImages(borrowed);
  }
  optimizer.scheduler.step();
  const result = metrics.result();
  if (ranks) {
    // how evenly the update's forward/backward tokens (prompt + response) were spread
    result[`perf/${prefix}_tokens_rank_min`] = Math.min(...rankTokens);
    result[`perf/${prefix}_tokens_rank_max`] = Math.max(...rankTokens);
  }
  return result;
}

/** The number of updates each group has run: every rank runs them in one order, so the keys agree. */
const updatesRun = new WeakMap<ProcessGroup, number>();

function nextUpdateKey(ranks: RankContext): number {
  const n = updatesRun.get(ranks.group!) ?? 0;
  updatesRun.set(ranks.group!, n + 1);
  return n;
}

/** The column the actor's loss is taken over: the rollout correction's loss mask, else the response mask. */
export function actorMaskColumn(batch: StepBatch): ColumnName {
  return batch.has("lossMask") ? "lossMask" : "responseMask";
}

/**
 * One actor update over a step's batch (columns: oldLogprobs, advantages; optional
 * turnIds, isWeights, lossMask, refLogprobs); returns actor/* metrics.
 */
export function updateActor(model: TrainingModel, optimizer: ParameterOptimizer, batch: StepBatch, opts: ActorUpdateOptions, rng: Rng): Promise<Record<string, number>> {
  if (opts.klLoss && !batch.has("refLogprobs")) throw new Error("actor.use_kl_loss is on but the batch has no reference log-probs");
  const maskColumn = actorMaskColumn(batch);
  const lossKeys = ["actor/pg_loss", "actor/entropy", ...(opts.klLoss ? ["actor/kl_loss"] : [])];
  return runUpdate(optimizer, batch, opts, rng, "actor", maskColumn, lossKeys, (micro, normalizer) =>
    readMetrics(
      torch.tidy(() => {
        const out = policyForward(model, micro.rows, { temperature: opts.temperature, chunkTokens: opts.chunkTokens, withEntropy: true });
        const mask = micro.get(maskColumn);
        const pg = policyLoss(
          opts.lossMode,
          {
            logProb: out.logProbs,
            oldLogProb: micro.get("oldLogprobs"),
            advantages: micro.get("advantages"),
            responseMask: mask,
            turnIds: micro.maybe("turnIds"),
            rolloutIsWeights: micro.maybe("isWeights"),
          },
          { clipRatio: opts.clipRatio, clipRatioLow: opts.clipRatioLow, clipRatioHigh: opts.clipRatioHigh, clipRatioC: opts.clipRatioC, lossAggMode: opts.lossAggMode, normalizer },
        );
        let loss = pg.loss;
        const entropy = aggregateLoss(out.entropy!, mask, opts.lossAggMode, normalizer);
        if (opts.entropyCoeff !== 0) loss = loss.sub(entropy.mul(opts.entropyCoeff));
        const extra: Record<string, Tensor> = { "actor/entropy": entropy.detach() };
        if (opts.klLoss) {
          // klLoss applies the coefficient; it is not multiplied again here.
          const kl = klLoss(klPenalty(out.logProbs, micro.get("refLogprobs"), opts.klLoss.type), mask, { coef: opts.klLoss.coef, lossAggMode: opts.lossAggMode, normalizer });
          loss = loss.add(kl.loss);
          Object.assign(extra, kl.metrics);
        }
        loss.backward();
        return { ...pg.metrics, ...extra };
      }),
    ),
  );
}

export interface CriticUpdateOptions extends BatchingOptions {
  cliprangeValue: number;
  lossAggMode: LossAggMode;
  /** seq-mean-token-sum-norm's constant. */
  tokenSumNorm: number;
  gradClip: number;
}

/** One critic update over a step's batch (columns: values, returns; optional valueMask); returns critic/* metrics. */
export function updateCritic(model: TrainingModel, head: ValueHead, optimizer: ParameterOptimizer, batch: StepBatch, opts: CriticUpdateOptions, rng: Rng): Promise<Record<string, number>> {
  if (!batch.has("values") || !batch.has("returns")) throw new Error("updateCritic: the batch has no values or returns");
  const maskColumn: ColumnName = batch.has("valueMask") ? "valueMask" : "responseMask";
  return runUpdate(optimizer, batch, opts, rng, "critic", maskColumn, ["critic/vf_loss"], (micro, normalizer) =>
    readMetrics(
      torch.tidy(() => {
        const vpreds = valueForward(model, head, micro.rows);
        const out = valueLoss(
          { vpreds, values: micro.get("values"), returns: micro.get("returns"), valueMask: micro.get(maskColumn) },
          { cliprangeValue: opts.cliprangeValue, lossAggMode: opts.lossAggMode, normalizer },
        );
        out.loss.backward();
        return out.metrics;
      }),
    ),
  );
}
