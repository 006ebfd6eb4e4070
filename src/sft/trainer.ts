/**
 * Supervised fine-tuning on trajectories: the warm start before RL.
 *
 *   episodes (solver and/or vagen eval outputs, filtered by success)
 *     -> token-level conversations (loss mask = the replies' tokens)
 *     -> shuffled batches -> cross-entropy on the replies -> AdamW
 *     -> checkpoints in the trainer's format, and the last one as a model directory
 *
 * The model is loaded and trained through the model-family seam as `vagen train` trains
 * it (`loadModelFamily`, `TrainingModel`, the family's training forward), so any
 * registered family can be warm-started. The loop emits typed events (`SftEvent`) and
 * writes nothing to the terminal; the CLI picks a view. What lands on disk is in
 * checkpoint.ts: `final/` is an ordinary model directory, so `vagen eval`, `vagen serve`
 * and RL start from it like from any model.
 */
import { join } from "node:path";
import * as torch from "../torch/index.ts";
import type { Tensor } from "../torch/index.ts";
import { VagenError } from "../core/errors.ts";
import { Rng } from "../core/rng.ts";
import { resolveDevice } from "../engine/load.ts";
import type { ConversationRecord } from "../models/conversation.ts";
import { loadModelFamily, type LoadModelOptions } from "../models/index.ts";
import { removeStaleCheckpointTemporaries } from "../training/checkpoint.ts";
import { loraSettingsOf } from "../training/lora-config.ts";
import { attachNewAdapter, releaseAdapter } from "../training/lora.ts";
import { TrainingModel } from "../training/forward.ts";
import { trainableWeights } from "../training/update.ts";
import { writeModelDir } from "../training/export.ts";
import { saveSftCheckpoint, writeFinalModel, writeSftConfig } from "./checkpoint.ts";
import { VAGEN_CHAT_TEMPLATE_KWARGS } from "../core/chat.ts";
import type { SftConfig } from "./config.ts";
import { evalEpisodes, solverEpisodes, type Episode } from "./episodes.ts";
import { batchLoss } from "./loss.ts";
import { episodeSamples } from "./samples.ts";

export type SftEvent =
  /** Trajectories gathered (`successRate` over all of them) and the kept ones turned into samples. */
  | { type: "data"; episodes: number; kept: number; successRate: number; samples: number; trainedTokens: number }
  /**
   * One optimizer step. `loss` is the mean over the step's trained tokens. `totalSteps` is
   * the schedule's length; with `mayStopEarly` (train.stop_below_loss) the run may end sooner.
   */
  | { type: "step"; step: number; totalSteps: number; mayStopEarly: boolean; epoch: number; loss: number; tokenAccuracy: number; lr: number; gradNorm: number }
  /** A checkpoint (`checkpoints/step_<N>`) was written. */
  | { type: "checkpoint"; step: number; dir: string }
  /** `train.stop_below_loss` was reached: the mean loss of the last steps, and the limit. */
  | { type: "stopped_early"; step: number; meanLoss: number; below: number }
  /** The probe (`SftProbe`) looked at the policy after `step`, and said to stop there or not. */
  | { type: "probed"; step: number; stop: boolean }
  /** The caller's signal was aborted: the run ends after `step`, which it saves as final/. */
  | { type: "interrupted"; step: number }
  | { type: "finished"; steps: number; finalDir: string; seconds: number };

export interface SftResult {
  /** The final model: a model directory (`output_dir/final`). */
  modelDir: string;
  /** The last checkpoint (`output_dir/checkpoints/step_<N>`), which `final/` was exported from. */
  checkpoint: string;
  steps: number;
  /** Mean loss of the last epoch's steps. */
  finalLoss: number;
  /** The caller's signal ended the run before its schedule or its stopping rule did. */
  interrupted: boolean;
}

/** Gather the config's episodes, keeping successful ones when `only_success` is set. */
async function gatherEpisodes(config: SftConfig): Promise<{ all: Episode[]; kept: Episode[] }> {
  const { data } = config;
  const episodes: Episode[] = [];
  if (data.solver) episodes.push(...(await solverEpisodes(data.solver, { seed: config.seed })));
  episodes.push(...evalEpisodes(data.eval_dirs));
  const kept = data.only_success ? episodes.filter((e) => e.success) : episodes;
  return { all: episodes, kept };
}

/**
 * A look at the policy while it trains: after every `every` steps from step `from` on,
 * the weights as they stand are written as a model directory (`output_dir/probe/`) and
 * `judge` says whether the warm start is done. The demo ends its warm start this way at a
 * success rate on levels of its own, not at a step count or a loss: imitation sits at
 * chance for a number of steps that varies by seed, then climbs fast.
 */
export interface SftProbe {
  from: number;
  every: number;
  judge: (modelDir: string, step: number) => Promise<boolean>;
}

export async function runSft(config: SftConfig, onEvent: (event: SftEvent) => void = () => {}, opts: { probe?: SftProbe; signal?: AbortSignal } = {}): Promise<SftResult> {
  const started = performance.now();
  torch.manualSeed(config.seed);
  const { all, kept } = await gatherEpisodes(config);
  if (kept.length === 0) {
    throw new VagenError(`${config.data.only_success ? "no successful episode" : "no episode"} among ${all.length} to train on`, "add trajectories, or set data.only_success=false");
  }

  const checkpointRoot = join(config.output_dir, "checkpoints");
  removeStaleCheckpointTemporaries(checkpointRoot);
  writeSftConfig(config);
  const family = loadModelFamily(config.model_dir, sftLoadOptions(config));
  // With LoRA only the adapter trains and checkpoints; final/ is the merged model.
  const lora = loraSettingsOf(config.train, config.seed);
  if (lora && opts.probe) throw new VagenError("sft: a probe needs the full weights, not a LoRA adapter");
  const model = new TrainingModel(family, lora && { train: attachNewAdapter(family, lora) });
  try {
    const codec = model.family.conversationCodec();
    const replies = { encode: (text: string) => model.family.tokenizer.encode(text) };
    const samples = kept.flatMap((e) => episodeSamples(e, config.data.layout, codec, replies));
    const trainedTokens = samples.reduce((n, s) => n + s.lossMask.reduce((a, b) => a + b, 0), 0);
    const successRate = all.filter((e) => e.success).length / all.length;
    onEvent({ type: "data", episodes: all.length, kept: kept.length, successRate, samples: samples.length, trainedTokens });

    const probe = opts.probe && {
      ...opts.probe,
      judge: (step: number) => opts.probe!.judge(writeModelDir(model.weights, config.model_dir, join(config.output_dir, "probe")), step),
    };
    const result = await trainOnSamples(model, samples, config, onEvent, { checkpointRoot, ...(probe ? { probe } : {}), ...(opts.signal ? { signal: opts.signal } : {}) });
    const finalDir = writeFinalModel(result.checkpoint!, config.model_dir, join(config.output_dir, "final"));
    onEvent({ type: "finished", steps: result.steps, finalDir, seconds: (performance.now() - started) / 1000 });
    return { modelDir: finalDir, checkpoint: result.checkpoint!, steps: result.steps, finalLoss: result.finalLoss, interrupted: result.interrupted };
  } finally {
    releaseAdapter(model.family);
    model.family.dispose();
  }
}

export interface TrainLoopOptions {
  /**
   * Where checkpoints go (`checkpoints/step_<N>`): after every epoch with
   * `train.save_every_epoch`, and after the last step. Unset: none are written.
   */
  checkpointRoot?: string;
  /** After every `every` steps from `from` on, `judge` says whether to stop there (`SftProbe`, weights already in hand). */
  probe?: { from: number; every: number; judge: (step: number) => Promise<boolean> };
  /** Once aborted, the loop ends after the step in progress (and saves it like a last step). */
  signal?: AbortSignal;
}

/** The optimisation loop over prepared samples (the model's weights are updated in place). */
export async function trainOnSamples(
  model: TrainingModel,
  samples: readonly ConversationRecord[],
  config: Pick<SftConfig, "seed" | "optim" | "train">,
  onEvent: (event: SftEvent) => void = () => {},
  opts: TrainLoopOptions = {},
): Promise<{ steps: number; finalLoss: number; interrupted: boolean; checkpoint?: string }> {
  const { optim, train } = config;
  const params = [...trainableWeights(model.weights, model.family, train.freeze_vision_tower).values()];
  for (const p of params) p.requiresGrad_(true);
  const optimizer = new torch.optim.AdamW(params, { lr: optim.lr, weightDecay: optim.weight_decay });
  const stepsPerEpoch = Math.ceil(samples.length / train.batch_size);
  const totalSteps = train.max_steps > 0 ? Math.min(train.max_steps, stepsPerEpoch * train.epochs) : stepsPerEpoch * train.epochs;
  const schedule =
    optim.schedule === "cosine"
      ? torch.optim.warmupCosineSchedule({ warmupSteps: optim.warmup_steps, totalSteps })
      : torch.optim.constantSchedule({ warmupSteps: optim.warmup_steps });
  const scheduler = new torch.optim.LRScheduler(optimizer, schedule);
  const rng = new Rng(config.seed, 11);
  let step = 0;
  let epochLosses: number[] = [];
  const recentLosses: number[] = [];
  let stopped = false;
  let interrupted = false;
  let checkpoint: { step: number; dir: string } | undefined;
  const save = (epoch: number, cursor: number): void => {
    if (!opts.checkpointRoot || checkpoint?.step === step) return;
    const dir = saveSftCheckpoint(opts.checkpointRoot, model, optimizer, { step, epoch, cursor, schedulerStep: scheduler.lastStep });
    checkpoint = { step, dir };
    onEvent({ type: "checkpoint", step, dir });
  };
  let epoch = 0;
  let cursor = 0;
  try {
    for (epoch = 0; epoch < train.epochs && step < totalSteps && !stopped; epoch++) {
      epochLosses = [];
      const order = shuffled([...samples.keys()], rng);
      for (cursor = 0; cursor < order.length && step < totalSteps && !stopped; ) {
        const batch = order.slice(cursor, cursor + train.batch_size).map((i) => samples[i]!);
        cursor += batch.length;
        const { loss, accuracy } = accumulateGradients(model, batch, train.micro_batch_size, train.label_smoothing);
        const gradNorm = optim.grad_clip > 0 ? clippedNorm(params, optim.grad_clip) : 0;
        const lr = optimizer.lr;
        torch.noGrad(() => optimizer.step());
        optimizer.zeroGrad();
        scheduler.step();
        step++;
        epochLosses.push(loss);
        onEvent({ type: "step", step, totalSteps, mayStopEarly: train.stop_below_loss > 0 || opts.probe !== undefined, epoch: epoch + 1, loss, tokenAccuracy: accuracy, lr, gradNorm });
        if (train.stop_below_loss > 0) {
          recentLosses.push(loss);
          if (recentLosses.length > STOP_LOSS_WINDOW) recentLosses.shift();
          const meanLoss = recentLosses.reduce((a, b) => a + b, 0) / STOP_LOSS_WINDOW;
          if (recentLosses.length === STOP_LOSS_WINDOW && meanLoss < train.stop_below_loss) {
            stopped = true;
            onEvent({ type: "stopped_early", step, meanLoss, below: train.stop_below_loss });
          }
        }
        const probe = opts.probe;
        if (!stopped && probe && step >= probe.from && (step - probe.from) % probe.every === 0 && step < totalSteps) {
          stopped = await probe.judge(step);
          onEvent({ type: "probed", step, stop: stopped });
        }
        // A step runs without awaiting anything: let a signal handler (Ctrl-C) run between steps.
        if (opts.signal) await new Promise<void>((resolve) => setImmediate(resolve));
        if (!stopped && opts.signal?.aborted && step < totalSteps) {
          stopped = interrupted = true;
          onEvent({ type: "interrupted", step });
        }
      }
      if (train.save_every_epoch && cursor === order.length) save(epoch, cursor);
    }
    // The last step's state, unless an epoch's checkpoint already holds it.
    save(Math.max(0, epoch - 1), cursor);
  } finally {
    for (const p of params) {
      p.grad = undefined;
      p.requiresGrad_(false);
    }
    optimizer.dispose();
  }
  const finalLoss = epochLosses.reduce((a, b) => a + b, 0) / Math.max(1, epochLosses.length);
  return { steps: step, finalLoss, interrupted, ...(checkpoint ? { checkpoint: checkpoint.dir } : {}) };
}

/** Steps whose mean loss `train.stop_below_loss` is compared with. */
export const STOP_LOSS_WINDOW = 10;

/** Forward and backward over a batch's micro-batches; the gradients are the token-mean's. */
function accumulateGradients(model: TrainingModel, batch: readonly ConversationRecord[], microBatchSize: number, labelSmoothing: number): { loss: number; accuracy: number } {
  const tokens = batch.reduce((n, s) => n + s.lossMask.reduce((a, b) => a + b, 0), 0);
  if (tokens === 0) throw new VagenError("a training batch has no trained tokens (every reply empty?)");
  let lossSum = 0;
  let correct = 0;
  for (let i = 0; i < batch.length; i += microBatchSize) {
    const micro = batch.slice(i, i + microBatchSize);
    torch.tidy(() => {
      const out = batchLoss(model, micro, { labelSmoothing });
      // Dividing by the whole batch's token count makes the accumulated gradient the batch mean.
      out.lossSum.div(tokens).backward();
      lossSum += out.lossSum.item();
      correct += out.correct;
    });
  }
  return { loss: lossSum / tokens, accuracy: correct / tokens };
}

/** Fisher-Yates with a seeded generator: the same seed gives the same batches. */
function shuffled<T>(items: T[], rng: Rng): T[] {
  for (let i = items.length - 1; i > 0; i--) {
    const j = rng.int(i + 1);
    [items[i], items[j]] = [items[j]!, items[i]!];
  }
  return items;
}

function clippedNorm(params: readonly Tensor[], maxNorm: number): number {
  const withGrad = params.filter((p) => {
    // `grad` hands out a new handle each time: free it, only its presence matters here.
    const grad = p.grad;
    grad?.dispose();
    return grad !== undefined;
  });
  const norm = torch.optim.clipGradNorm(withGrad, maxNorm);
  const value = norm.item();
  norm.dispose();
  return value;
}

/** How `vagen sft` loads its model: the config's device and dtype, and its chat-template arguments (VAGEN's by default). */
export function sftLoadOptions(config: Pick<SftConfig, "device" | "dtype" | "data">): LoadModelOptions {
  return { device: resolveDevice(config.device), dtype: config.dtype, chatTemplateVariables: config.data.apply_chat_template_kwargs ?? VAGEN_CHAT_TEMPLATE_KWARGS };
}
