/**
 * The supervised loss of a batch of conversations: next-token cross-entropy on the
 * model's own tokens only (loss mask 1), summed, plus how many of those tokens the model
 * already predicts (argmax), for a readable accuracy.
 *
 * A sample goes through the trainer's forward (src/training/forward.ts) as a row cut at
 * its first trained token: the tokens before it are the prompt, the rest the response,
 * packed and forwarded (images included, through the model family's training forward)
 * exactly as an RL row is. Padding is masked out of attention and loss.
 */
import * as torch from "../torch/index.ts";
import type { Tensor } from "../torch/index.ts";
import type { ConversationRecord } from "../models/conversation.ts";
import type { PackableRow, TrainingModel } from "../training/forward.ts";

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

/** A sample as a row: prompt = the tokens before its first trained one (`promptLength`). */
function sampleRow(sample: ConversationRecord): PackableRow & { responseMask: readonly number[] } {
  const cut = sample.promptLength;
  return {
    promptIds: sample.tokenIds.slice(0, cut),
    responseIds: sample.tokenIds.slice(cut),
    responseMask: sample.lossMask.slice(cut),
    images: sample.images,
  };
}

export function batchLoss(model: TrainingModel, samples: readonly ConversationRecord[], opts: { labelSmoothing?: number } = {}): BatchLoss {
  const rows = samples.map(sampleRow);
  return torch.tidy(() => {
    const { hidden, packed } = model.responseHidden(rows);
    const R = packed.responseWidth;
    // hidden[b, j] predicts response token j: the target is that token where it is trained.
    const targets = new Float64Array(rows.length * R).fill(IGNORE);
    let tokens = 0;
    rows.forEach((row, b) => {
      row.responseMask.forEach((m, j) => {
        if (m !== 1) return;
        targets[b * R + j] = row.responseIds[j]!;
        tokens++;
      });
    });
    const logits = model.logits(hidden).to("f32");
    const flat = logits.reshape([-1, logits.shape[2]!]);
    const target = torch.tensor(targets, [targets.length], { dtype: "i64", device: model.device });
    const lossSum = torch.F.crossEntropy(flat, target, { reduction: "sum", ignoreIndex: IGNORE, labelSmoothing: opts.labelSmoothing ?? 0 });
    const correct = torch.noGrad(() => flat.argmax(1).eq(target).sum().item());
    return { lossSum, tokens, correct };
  });
}
