/**
 * The PPO update: the actor's and the critic's losses from src/algorithms over a step's
 * rows, in mini-batches (one optimizer step each) of micro-batches (one forward/backward
 * each, gradients accumulated), for ppo_epochs epochs, as verl's dp_actor / dp_critic.
 *
 *   for epoch in ppo_epochs:
 *     for mini in split(rows, n_mini, shuffled?):
 *       zero_grad
 *       for micro in mini (by count, or packed to a token budget):
 *         loss(micro) * rows(micro) / rows(mini) -> backward
 *       clip_grad_norm(grad_clip); optimizer.step(); (metrics)
 *   scheduler.step()     # once per training step, as verl
 *
 * Per-row data (old log-probs, advantages, ...) is carried as host arrays, one per row,
 * and turned into [B, R] tensors per micro-batch, so rows of any width mix freely.
 */
import * as torch from "../torch/index.ts";
import { optim, type Tensor } from "../torch/index.ts";

const { AdamW, LRScheduler, clipGradNorm, constantSchedule, warmupCosineSchedule } = optim;
import { aggregateLoss, klLoss, klPenalty, maskedMean, policyLoss, readMetrics, valueLoss, type LossAggMode, type PolicyLossMode, type SampledKlPenalty } from "../algorithms/index.ts";
import type { ModelFamily, ValueHead } from "../models/index.ts";
import type { TrainingRow } from "../rollout/types.ts";
import { Rng } from "../core/rng.ts";
import { policyForward, rowsTensor, valueForward, type TrainingModel } from "./forward.ts";

/** Per-row columns the update reads, one array per row of its response length. */
export interface RowColumns {
  oldLogprobs: Float32Array[];
  advantages: Float32Array[];
  returns?: Float32Array[];
  values?: Float32Array[];
  refLogprobs?: Float32Array[];
  /** Positions the critic is trained on (default: the response mask). */
  valueMask?: Float32Array[];
  /** Turn id per token (-1 outside turns), for turn_gspo / turn_ppo. */
  turnIds?: Int32Array[];
}

export interface BatchingOptions {
  /** Mini-batches per epoch (train_batch_size / ppo_mini_batch_size). */
  miniBatches: number;
  /** Rows per micro-batch when packing by count. */
  microBatchSize: number;
  /** Pack micro-batches to a token budget instead (prompt + response tokens). */
  maxTokens?: number;
  epochs: number;
  shuffle: boolean;
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
}

/**
 * The weights an optimizer updates: all of `named`, or with `freezeVision` all but the
 * vision encoder's (`freeze_vision_tower`), which then keep the values they were loaded with.
 */
export function trainableWeights(named: Map<string, Tensor>, family: Pick<ModelFamily, "isVisionWeight">, freezeVision: boolean): Map<string, Tensor> {
  return freezeVision ? new Map([...named].filter(([name]) => !family.isVisionWeight(name))) : named;
}

/** AdamW plus its schedule over a set of named parameters, with a checkpointable state. */
export class ParameterOptimizer {
  readonly optimizer: optim.AdamW;
  readonly scheduler: optim.LRScheduler;

  constructor(
    readonly named: Map<string, Tensor>,
    settings: OptimizerSettings,
  ) {
    const params = [...named.values()];
    for (const p of params) p.requiresGrad_(true);
    this.optimizer = new AdamW(params, { lr: settings.lr, weightDecay: settings.weightDecay, betas: settings.betas, eps: settings.eps });
    const schedule =
      settings.style === "cosine"
        ? warmupCosineSchedule({ warmupSteps: settings.warmupSteps, totalSteps: settings.totalSteps, minLrRatio: settings.minLrRatio })
        : constantSchedule({ warmupSteps: settings.warmupSteps });
    this.scheduler = new LRScheduler(this.optimizer, schedule);
  }

  get params(): Tensor[] {
    return this.optimizer.params;
  }

  zeroGrad(): void {
    for (const p of this.params) {
      p.grad?.dispose();
      p.grad = undefined;
    }
  }

  /** Clip, step; returns the gradient norm before clipping. */
  step(gradClip: number): number {
    const norm = clipGradNorm(this.params, gradClip);
    const value = norm.item();
    norm.dispose();
    // A non-finite norm means a bad batch: skip the step rather than poison the weights (verl does the same).
    if (Number.isFinite(value)) this.optimizer.step();
    this.zeroGrad();
    return value;
  }

  dispose(): void {
    this.zeroGrad();
    for (const p of this.params) p.requiresGrad_(false);
    this.optimizer.dispose();
  }
}

/** Means of per-micro-batch metric values, as verl logs them. */
class MetricMeans {
  #sums = new Map<string, { sum: number; n: number }>();

  add(values: Record<string, number>): void {
    for (const [k, v] of Object.entries(values)) {
      const e = this.#sums.get(k) ?? { sum: 0, n: 0 };
      e.sum += v;
      e.n += 1;
      this.#sums.set(k, e);
    }
  }

  means(): Record<string, number> {
    return Object.fromEntries([...this.#sums].map(([k, e]) => [k, e.sum / e.n]));
  }
}

export interface ActorUpdateOptions extends BatchingOptions {
  temperature: number;
  chunkTokens: number;
  lossMode: PolicyLossMode;
  lossAggMode: LossAggMode;
  clipRatio: number;
  clipRatioLow?: number;
  clipRatioHigh?: number;
  clipRatioC: number;
  entropyCoeff: number;
  /** KL loss against the reference policy (needs refLogprobs). */
  klLoss?: { coef: number; type: SampledKlPenalty };
  gradClip: number;
}

/**
 * The PPO update schedule both updates share: `epochs` passes over the rows, each split
 * into mini-batches (one optimizer step each, then `afterMini`'s metrics), each split into
 * micro-batches whose losses are scaled by their share of the mini-batch and accumulated.
 * Returns the metrics averaged over every micro- and mini-batch; the scheduler steps once.
 */
function runUpdate(
  optim: ParameterOptimizer,
  rows: readonly TrainingRow[],
  opts: BatchingOptions & { gradClip: number },
  rng: Rng,
  prefix: "actor" | "critic",
  microStep: (micro: number[], microRows: TrainingRow[], share: number) => Record<string, number>,
): Record<string, number> {
  const metrics = new MetricMeans();
  for (let epoch = 0; epoch < opts.epochs; epoch++) {
    for (const mini of miniBatchPlan(rows.length, opts.miniBatches, opts.shuffle, rng)) {
      for (const micro of microBatchPlan(mini, rows, opts)) {
        metrics.add(microStep(micro, micro.map((i) => rows[i]!), micro.length / mini.length));
      }
      metrics.add({ [`${prefix}/grad_norm`]: optim.step(opts.gradClip), [`${prefix}/lr`]: optim.optimizer.lr });
    }
  }
  optim.scheduler.step();
  return metrics.means();
}

/** One actor update over a step's rows; returns actor/* metrics. */
export function updateActor(model: TrainingModel, optim: ParameterOptimizer, rows: readonly TrainingRow[], cols: RowColumns, opts: ActorUpdateOptions, rng: Rng): Record<string, number> {
  const device = model.device;
  return runUpdate(optim, rows, opts, rng, "actor", (micro, microRows, share) =>
    readMetrics(
      torch.tidy(() => {
        const out = policyForward(model, microRows, { temperature: opts.temperature, chunkTokens: opts.chunkTokens, withEntropy: true });
        const R = out.logProbs.shape[1]!;
        const col = (c: readonly ArrayLike<number>[]) => rowsTensor(micro.map((i) => c[i]!), R, { device });
        const mask = rowsTensor(microRows.map((r) => r.responseMask), R, { device });
        const pg = policyLoss(
          opts.lossMode,
          {
            logProb: out.logProbs,
            oldLogProb: col(cols.oldLogprobs),
            advantages: col(cols.advantages),
            responseMask: mask,
            turnIds: cols.turnIds ? rowsTensor(micro.map((i) => cols.turnIds![i]!), R, { dtype: "i64", fill: -1, device }) : undefined,
          },
          { clipRatio: opts.clipRatio, clipRatioLow: opts.clipRatioLow, clipRatioHigh: opts.clipRatioHigh, clipRatioC: opts.clipRatioC, lossAggMode: opts.lossAggMode },
        );
        let loss = pg.loss;
        const entropy = aggregateLoss(out.entropy!, mask, opts.lossAggMode);
        if (opts.entropyCoeff !== 0) loss = loss.sub(entropy.mul(opts.entropyCoeff));
        const extra: Record<string, Tensor> = { "actor/entropy": entropy.detach() };
        if (opts.klLoss) {
          if (!cols.refLogprobs) throw new Error("actor.use_kl_loss is on but the batch has no reference log-probs");
          const kl = klLoss(klPenalty(out.logProbs, col(cols.refLogprobs), opts.klLoss.type), mask, { coef: opts.klLoss.coef, lossAggMode: opts.lossAggMode });
          loss = loss.add(kl.loss.mul(opts.klLoss.coef));
          Object.assign(extra, kl.metrics);
        }
        loss.mul(share).backward();
        return { ...pg.metrics, ...extra };
      }),
    ),
  );
}

export interface CriticUpdateOptions extends BatchingOptions {
  cliprangeValue: number;
  lossAggMode: LossAggMode;
  gradClip: number;
}

/** One critic update over a step's rows; returns critic/* metrics. */
export function updateCritic(model: TrainingModel, head: ValueHead, optim: ParameterOptimizer, rows: readonly TrainingRow[], cols: RowColumns, opts: CriticUpdateOptions, rng: Rng): Record<string, number> {
  if (!cols.values || !cols.returns) throw new Error("updateCritic: the batch has no values or returns");
  const device = model.device;
  return runUpdate(optim, rows, opts, rng, "critic", (micro, microRows, share) =>
    readMetrics(
      torch.tidy(() => {
        const vpreds = valueForward(model, head, microRows);
        const R = vpreds.shape[1]!;
        const col = (c: readonly ArrayLike<number>[]) => rowsTensor(micro.map((i) => c[i]!), R, { device });
        const mask = cols.valueMask ? col(cols.valueMask) : rowsTensor(microRows.map((r) => r.responseMask), R, { device });
        const out = valueLoss({ vpreds, values: col(cols.values!), returns: col(cols.returns!), valueMask: mask }, { cliprangeValue: opts.cliprangeValue, lossAggMode: opts.lossAggMode });
        out.loss.mul(share).backward();
        return out.metrics;
      }),
    ),
  );
}

/** Masked mean of a [B, R] tensor as a number (for metrics). */
export function maskedMeanValue(values: Tensor, mask: Tensor): number {
  return torch.tidy(() => maskedMean(values, mask).item());
}
