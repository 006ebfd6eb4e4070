/**
 * The supervised loss of a batch of conversations: next-token cross-entropy on the
 * model's own tokens only (loss mask 1), summed, plus how many of those tokens the model
 * already predicts (argmax), for a readable accuracy.
 *
 * Rows are right-padded to the longest; padding is masked out of attention and loss. The
 * images of every row go through the vision tower together, in row order, which is the
 * order `forwardBatch` merges their features into the image-pad positions.
 */
import * as torch from "../torch/index.ts";
import type { Tensor } from "../torch/index.ts";
import type { ConversationRecord } from "../models/conversation.ts";
import type { RGBImage } from "../core/image.ts";
import { processImages, type ImageProcessorOptions, type ProcessedImages } from "../models/image-processor.ts";
import type { Qwen25VLModel } from "../models/qwen2_5_vl/model.ts";

/** Targets that carry no loss (PyTorch's ignore_index). */
const IGNORE = -100;

export interface BatchLoss {
  /**
   * Sum of the trained tokens' cross-entropies (a 0-d tensor with a graph): their negative
   * log-likelihoods, or with label smoothing e, (1 - e) NLL + e times the mean over the
   * vocabulary of -log p.
   */
  lossSum: Tensor;
  /** Trained tokens in the batch. */
  tokens: number;
  /** Trained tokens the model's argmax already gets right. */
  correct: number;
}

export function batchLoss(model: Qwen25VLModel, imageOptions: ImageProcessorOptions, samples: readonly ConversationRecord[], padId: number, opts: { labelSmoothing?: number } = {}): BatchLoss {
  const width = Math.max(...samples.map((s) => s.tokenIds.length));
  const inputIds = samples.map((s) => [...s.tokenIds, ...new Array<number>(width - s.tokenIds.length).fill(padId)]);
  const attentionMask = samples.map((s) => [...new Array<number>(s.tokenIds.length).fill(1), ...new Array<number>(width - s.tokenIds.length).fill(0)]);
  // Position t predicts token t + 1: the target at t is the next token when the model sampled it.
  const targets = new Float64Array(samples.length * (width - 1)).fill(IGNORE);
  let tokens = 0;
  samples.forEach((s, b) => {
    for (let t = 1; t < s.tokenIds.length; t++) {
      if (s.lossMask[t] === 1) {
        targets[b * (width - 1) + t - 1] = s.tokenIds[t]!;
        tokens++;
      }
    }
  });

  const images = samples.flatMap((s) => s.images.map((i) => i.image));
  const processed = images.length ? processCached(images, imageOptions) : undefined;

  return torch.tidy(() => {
    const pixelValues = processed ? torch.tensor(processed.pixelValues, [processed.numPatches, processed.patchDim], { dtype: "f32", device: model.device }) : undefined;
    const { hidden } = model.forwardBatch({
      inputIds,
      attentionMask: samples.length > 1 ? attentionMask : undefined,
      pixelValues,
      imageGridThw: processed?.gridThw ?? [],
    });
    const logits = model.logits(hidden.narrow(1, 0, width - 1)).to("f32");
    const vocab = logits.shape[2]!;
    const flat = logits.reshape([-1, vocab]);
    const target = torch.tensor(targets, [targets.length], { dtype: "i64", device: model.device });
    const lossSum = torch.F.crossEntropy(flat, target, { reduction: "sum", ignoreIndex: IGNORE, labelSmoothing: opts.labelSmoothing ?? 0 });
    const correct = torch.noGrad(() => flat.argmax(1).eq(target).sum().item());
    return { lossSum, tokens, correct };
  });
}

/**
 * A supervised run shows each sample's images every epoch; resizing and patching them
 * again each time costs more than the vision tower. Samples are built once and never
 * changed, so their images' patches are kept, up to a budget: float patches take about
 * 1.5 times the bytes of the 256 x 256 render they come from (0.3 MB a 4x4 FrozenLake
 * board), and with every sample's kept 12,299 samples grew to 12 GB. Past the budget new
 * images are patched each time they come; no eviction, because epochs visit samples in
 * a cycle and an LRU would then never hit. An image is cached under one set of options.
 */
export const PATCH_CACHE_BUDGET_BYTES = 1 << 30;

const patchCache = new WeakMap<RGBImage, { options: ImageProcessorOptions; processed: ProcessedImages }>();
let patchCacheBytes = 0;
const releaseCached = new FinalizationRegistry<number>((bytes) => (patchCacheBytes -= bytes));

function processCached(images: readonly RGBImage[], options: ImageProcessorOptions): ProcessedImages {
  const parts = images.map((image) => {
    const hit = patchCache.get(image);
    if (hit !== undefined && hit.options === options) return hit.processed;
    const processed = processImages([image], options);
    if (hit === undefined && patchCacheBytes + processed.pixelValues.byteLength <= PATCH_CACHE_BUDGET_BYTES) {
      patchCache.set(image, { options, processed });
      patchCacheBytes += processed.pixelValues.byteLength;
      releaseCached.register(image, processed.pixelValues.byteLength);
    }
    return processed;
  });
  if (parts.length === 1) return parts[0]!;
  const numPatches = parts.reduce((n, p) => n + p.numPatches, 0);
  const pixelValues = new Float32Array(numPatches * parts[0]!.patchDim);
  let offset = 0;
  for (const p of parts) {
    pixelValues.set(p.pixelValues, offset);
    offset += p.pixelValues.length;
  }
  return { pixelValues, numPatches, patchDim: parts[0]!.patchDim, gridThw: parts.flatMap((p) => p.gridThw) };
}
