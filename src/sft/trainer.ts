/**
 * Supervised fine-tuning on trajectories: the warm start before RL.
 *
 *   episodes (solver and/or vagen eval outputs, filtered by success)
 *     -> token-level conversations (loss mask = the replies' tokens)
 *     -> shuffled batches -> cross-entropy on the replies -> AdamW
 *     -> checkpoints as ordinary model directories
 *
 * The loop emits typed events (`SftEvent`) and writes nothing to the terminal; the CLI
 * picks a view. A checkpoint is a copy of the base model directory with the trained
 * weights, so `vagen eval`, `vagen serve` and RL start from it like from any model.
 */
import { copyFileSync, mkdirSync, readdirSync, renameSync, rmSync } from "node:fs";
import { join } from "node:path";
import * as torch from "../torch/index.ts";
import type { Tensor } from "../torch/index.ts";
import { VagenError } from "../core/errors.ts";
import { Rng } from "../core/rng.ts";
import { resolveDevice } from "../engine/load.ts";
import type { ConversationRecord } from "../models/conversation.ts";
import { Qwen25VLChatModel } from "../models/qwen2_5_vl/chat-model.ts";
import { Qwen25VLConversationCodec } from "../models/qwen2_5_vl/conversation-codec.ts";
import { trainableWeights } from "../training/update.ts";
import type { SftConfig } from "./config.ts";
import { evalEpisodes, solverEpisodes, type Episode } from "./episodes.ts";
import { batchLoss } from "./loss.ts";
import { episodeSamples } from "./samples.ts";

export type SftEvent =
  /** Trajectories gathered (`successRate` over all of them) and the kept ones turned into samples. */
  | { type: "data"; episodes: number; kept: number; successRate: number; samples: number; trainedTokens: number }
  /** One optimizer step. `loss` is the mean over the step's trained tokens. */
  | { type: "step"; step: number; totalSteps: number; epoch: number; loss: number; tokenAccuracy: number; lr: number; gradNorm: number }
  | { type: "checkpoint"; step: number; dir: string }
  /** `train.stop_below_loss` was reached: the mean loss of the last steps, and the limit. */
  | { type: "stopped_early"; step: number; meanLoss: number; below: number }
  | { type: "finished"; steps: number; finalDir: string; seconds: number };

export interface SftResult {
  /** The final checkpoint: a model directory. */
  modelDir: string;
  steps: number;
  /** Mean loss of the last epoch's steps. */
  finalLoss: number;
}

/** Gather the config's episodes, keeping successful ones when `only_success` is set. */
export async function gatherEpisodes(config: SftConfig): Promise<{ all: Episode[]; kept: Episode[] }> {
  const { data } = config;
  const episodes: Episode[] = [];
  if (data.solver) episodes.push(...(await solverEpisodes(data.solver, { seed: config.seed })));
  episodes.push(...evalEpisodes(data.eval_dirs));
  const kept = data.only_success ? episodes.filter((e) => e.success) : episodes;
  return { all: episodes, kept };
}

export async function runSft(config: SftConfig, onEvent: (event: SftEvent) => void = () => {}): Promise<SftResult> {
  const started = performance.now();
  torch.manualSeed(config.seed);
  const { all, kept } = await gatherEpisodes(config);
  if (kept.length === 0) {
    throw new VagenError(`${config.data.only_success ? "no successful episode" : "no episode"} among ${all.length} to train on`, "add trajectories, or set data.only_success=false");
  }

  const device = resolveDevice(config.device);
  const chat = Qwen25VLChatModel.load(config.model_dir, { device, dtype: config.dtype });
  try {
    const codec = new Qwen25VLConversationCodec(chat.processor);
    const imEnd = chat.tokenizer.maybeTokenId("<|im_end|>");
    if (imEnd === undefined) throw new VagenError(`${config.model_dir}: the tokenizer has no <|im_end|> token, which ends a Qwen chat turn`);
    const replies = { encode: (text: string) => chat.tokenizer.encode(text), endOfTurnId: imEnd };
    const samples = kept.flatMap((e) => episodeSamples(e, config.data.layout, codec, replies));
    const trainedTokens = samples.reduce((n, s) => n + s.lossMask.reduce((a, b) => a + b, 0), 0);
    const successRate = all.filter((e) => e.success).length / all.length;
    onEvent({ type: "data", episodes: all.length, kept: kept.length, successRate, samples: samples.length, trainedTokens });

    const result = trainOnSamples(chat, samples, config, onEvent);
    const finalDir = join(config.output_dir, "final");
    saveCheckpoint(chat, config.model_dir, finalDir);
    onEvent({ type: "checkpoint", step: result.steps, dir: finalDir });
    onEvent({ type: "finished", steps: result.steps, finalDir, seconds: (performance.now() - started) / 1000 });
    return { modelDir: finalDir, steps: result.steps, finalLoss: result.finalLoss };
  } finally {
    chat.dispose();
  }
}

/** The optimisation loop over prepared samples (the model's weights are updated in place). */
export function trainOnSamples(
  chat: Qwen25VLChatModel,
  samples: readonly ConversationRecord[],
  config: Pick<SftConfig, "seed" | "optim" | "train" | "output_dir" | "model_dir">,
  onEvent: (event: SftEvent) => void = () => {},
): { steps: number; finalLoss: number } {
  const { optim, train } = config;
  const params = [...trainableWeights(chat.model.weights, chat, train.freeze_vision_tower).values()];
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
  try {
    for (let epoch = 1; epoch <= train.epochs && step < totalSteps && !stopped; epoch++) {
      epochLosses = [];
      const order = shuffled([...samples.keys()], rng);
      for (let start = 0; start < order.length && step < totalSteps && !stopped; start += train.batch_size) {
        const batch = order.slice(start, start + train.batch_size).map((i) => samples[i]!);
        const { loss, accuracy } = accumulateGradients(chat, batch, train.micro_batch_size, train.label_smoothing);
        const gradNorm = optim.grad_clip > 0 ? clippedNorm(params, optim.grad_clip) : 0;
        const lr = optimizer.lr;
        torch.noGrad(() => optimizer.step());
        optimizer.zeroGrad();
        scheduler.step();
        step++;
        epochLosses.push(loss);
        onEvent({ type: "step", step, totalSteps, epoch, loss, tokenAccuracy: accuracy, lr, gradNorm });
        if (train.stop_below_loss > 0) {
          recentLosses.push(loss);
          if (recentLosses.length > STOP_LOSS_WINDOW) recentLosses.shift();
          const meanLoss = recentLosses.reduce((a, b) => a + b, 0) / STOP_LOSS_WINDOW;
          if (recentLosses.length === STOP_LOSS_WINDOW && meanLoss < train.stop_below_loss) {
            stopped = true;
            onEvent({ type: "stopped_early", step, meanLoss, below: train.stop_below_loss });
          }
        }
      }
      if (train.save_every_epoch && step < totalSteps) {
        const dir = join(config.output_dir, "checkpoints", `epoch_${epoch}`);
        saveCheckpoint(chat, config.model_dir, dir);
        onEvent({ type: "checkpoint", step, dir });
      }
    }
  } finally {
    for (const p of params) {
      p.grad = undefined;
      p.requiresGrad_(false);
    }
    optimizer.dispose();
  }
  const finalLoss = epochLosses.reduce((a, b) => a + b, 0) / Math.max(1, epochLosses.length);
  return { steps: step, finalLoss };
}

/** Steps whose mean loss `train.stop_below_loss` is compared with. */
export const STOP_LOSS_WINDOW = 10;

/** Forward and backward over a batch's micro-batches; the gradients are the token-mean's. */
function accumulateGradients(chat: Qwen25VLChatModel, batch: readonly ConversationRecord[], microBatchSize: number, labelSmoothing: number): { loss: number; accuracy: number } {
  const tokens = batch.reduce((n, s) => n + s.lossMask.reduce((a, b) => a + b, 0), 0);
  if (tokens === 0) throw new VagenError("a training batch has no trained tokens (every reply empty?)");
  let lossSum = 0;
  let correct = 0;
  for (let i = 0; i < batch.length; i += microBatchSize) {
    const micro = batch.slice(i, i + microBatchSize);
    torch.tidy(() => {
      const out = batchLoss(chat.model, chat.imageOptions, micro, chat.padTokenId, { labelSmoothing });
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

/**
 * Write the model's current weights as a model directory: the base directory's other files
 * (config, tokenizer, chat template, processor) copied, weights in model.safetensors.
 * Written to a temporary folder and renamed, so a checkpoint that exists is complete.
 */
export function saveCheckpoint(chat: Qwen25VLChatModel, baseDir: string, dir: string): void {
  const tmp = `${dir}.tmp-${process.pid}`;
  rmSync(tmp, { recursive: true, force: true });
  mkdirSync(tmp, { recursive: true });
  for (const entry of readdirSync(baseDir, { withFileTypes: true })) {
    if (!entry.isFile() || entry.name.endsWith(".safetensors") || entry.name === torch.safetensors.INDEX_FILE) continue;
    copyFileSync(join(baseDir, entry.name), join(tmp, entry.name));
  }
  torch.safetensors.save(join(tmp, "model.safetensors"), chat.model.weights, { format: "pt" });
  rmSync(dir, { recursive: true, force: true });
  renameSync(tmp, dir);
}
