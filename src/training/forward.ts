/**
 * The training forward: training rows in, per-response-token log-probs, entropies or
 * critic values out, differentiably. The one place rows become a padded batch: the RL
 * trainer's forwards and `vagen sft`'s loss both pack here.
 *
 * Rows are packed as verl packs them: the prompt left-padded to P, the response
 * right-padded to R, so response token j of every row sits at column P + j and is
 * predicted by the hidden state at column P + j - 1:
 *
 *   ids      [pad pad p0 p1 p2 | r0 r1 r2 pad]
 *   hidden    ........ h(P-1) h(P) h(P+1) ...      -> logits predicting r0 r1 r2 ...
 *
 * Critic values follow the same shift: values[b, j] = V(state before response token j),
 * the convention of every estimator (src/algorithms/estimators/types.ts).
 *
 * Every row that has images brings them into the forward (the family seam's
 * forwardForTraining processes their pixels); a forward that dropped them would still
 * lower the loss and hide the bug, so the family refuses image tokens without features.
 * Nothing here knows a family: ids, mask and images go through `ModelFamily`.
 */
import * as torch from "../torch/index.ts";
import type { Device, Tensor } from "../torch/index.ts";
import { tokenLogProbs } from "../algorithms/index.ts";
import { ValueHead, adapterOf, attachAdapter, type LoraAdapter, type ModelFamily } from "../models/index.ts";
import type { RowImage, TrainingRow } from "../rollout/types.ts";

/**
 * What packing reads of a row: a `TrainingRow` is one, and so is a supervised sample
 * cut at its first trained token (src/sft/loss.ts).
 */
export interface PackableRow {
  promptIds: readonly number[];
  responseIds: readonly number[];
  /** The row's images in placeholder order (prompt and response). */
  images: readonly Pick<RowImage, "image">[];
}

/** A micro-batch of rows as host arrays, in verl's layout. */
export interface PackedRows {
  /** [B][P + R] token ids, pads where the mask is 0. */
  inputIds: number[][];
  /** [B][P + R] 1 at real tokens. */
  attentionMask: number[][];
  /** Whether any row is padded (without padding the forward needs no mask). */
  padded: boolean;
  promptWidth: number;
  responseWidth: number;
}

export function packRows(rows: readonly PackableRow[], padId: number): PackedRows {
  const P = Math.max(1, ...rows.map((r) => r.promptIds.length));
  const R = Math.max(1, ...rows.map((r) => r.responseIds.length));
  const fill = (n: number, value: number) => new Array<number>(n).fill(value);
  const inputIds: number[][] = [];
  const attentionMask: number[][] = [];
  let padded = false;
  for (const row of rows) {
    const lead = P - row.promptIds.length;
    const tail = R - row.responseIds.length;
    if (lead > 0 || tail > 0) padded = true;
    inputIds.push([...fill(lead, padId), ...row.promptIds, ...row.responseIds, ...fill(tail, padId)]);
    attentionMask.push([...fill(lead, 0), ...fill(row.promptIds.length + row.responseIds.length, 1), ...fill(tail, 0)]);
  }
  return { inputIds, attentionMask, padded, promptWidth: P, responseWidth: R };
}

/** [B, R] host columns (one array per row, shorter rows padded with `fill`) as a tensor. */
export function rowsTensor(columns: readonly ArrayLike<number>[], width: number, opts: { dtype?: "f32" | "i64"; fill?: number; device: string }): Tensor {
  const flat = new Float64Array(columns.length * width).fill(opts.fill ?? 0);
  columns.forEach((col, b) => {
    for (let j = 0; j < Math.min(width, col.length); j++) flat[b * width + j] = col[j]!;
  });
  return torch.tensor(flat, [columns.length, width], { dtype: opts.dtype ?? "f32", device: opts.device as never });
}

/**
 * How a training model relates to a LoRA adapter and its family's weights:
 * `train` makes the attached adapter's tensors the model's weights (what trains and
 * checkpoints; the base stays frozen); `off` runs every forward on the base alone (the
 * reference policy of a LoRA run, over the actor's own family); `swap` trains an adapter
 * of its own over a family another model's adapter is attached to (the critic of a LoRA
 * run, sharing the actor's frozen base): each forward runs with it attached in the
 * other's place, which is put back after.
 */
export type AdapterUse = { train: LoraAdapter } | { off: LoraAdapter } | { swap: LoraAdapter };

/** A model family as the trainer uses it: the training forward and the weights it reads. */
export class TrainingModel {
  /**
   * The weights a trainer updates, by their checkpoint names: the family's own map, so
   * the engine generates with what the optimizer writes in place; with a trained LoRA
   * adapter, the adapter's A and B (PEFT's names) instead.
   */
  readonly weights: Map<string, Tensor>;
  /** The adapter whose path every forward of this model leaves out. */
  private readonly adapterOff?: LoraAdapter;
  /** This model's own adapter, attached for each of its forwards in place of the family's. */
  private readonly adapterSwapped?: LoraAdapter;

  /** The adapter this model brought over another's family (`swap`), for its owner to free. */
  get ownAdapter(): LoraAdapter | undefined {
    return this.adapterSwapped;
  }

  constructor(
    readonly family: ModelFamily,
    adapter?: AdapterUse,
  ) {
    this.weights = adapter && "train" in adapter ? adapter.train.weights : adapter && "swap" in adapter ? adapter.swap.weights : family.weights;
    this.adapterOff = adapter && "off" in adapter ? adapter.off : undefined;
    this.adapterSwapped = adapter && "swap" in adapter ? adapter.swap : undefined;
  }

  /**
   * Runs `fn` with this model's view of the adapters: the base alone (`off`), its own
   * adapter in place of the attached one (`swap`), or as attached. Only the forward runs
   * inside: the autograd graph keeps the tensors it read, so backward may come later.
   */
  private withAdapters<T>(fn: () => T): T {
    if (this.adapterOff) return this.adapterOff.without(fn);
    if (!this.adapterSwapped) return fn();
    const attached = adapterOf(this.family.weights);
    attachAdapter(this.family.weights, this.adapterSwapped);
    try {
      return fn();
    } finally {
      attachAdapter(this.family.weights, attached);
    }
  }

  get device(): Device {
    return this.family.device;
  }

  /** [B, R, hidden]: the hidden states that predict each response position. */
  responseHidden(rows: readonly PackableRow[]): { hidden: Tensor; packed: PackedRows } {
    const packed = packRows(rows, padTokenOf(this.family));
    const forward = () =>
      torch.tidy(() => {
        const hidden = this.family.forwardForTraining({
          inputIds: packed.inputIds,
          attentionMask: packed.padded ? packed.attentionMask : undefined,
          images: rows.map((r) => r.images.map((i) => i.image)),
        });
        return { hidden: hidden.narrow(1, packed.promptWidth - 1, packed.responseWidth), packed };
      });
    return this.withAdapters(forward);
  }

  /** [..., hidden] -> [..., vocab]. */
  logits(hidden: Tensor): Tensor {
    return this.family.logits(hidden);
  }

  /** A fresh value head for the critic, seeded. */
  newValueHead(seed: number): ValueHead {
    return ValueHead.init(this.family.spec.hiddenSize, { device: this.family.device, dtype: this.family.dtype, seed });
  }
}

/** Padding id (masked out everywhere; any valid id works). */
function padTokenOf(family: ModelFamily): number {
  return family.eosTokenIds[0] ?? 0;
}

export interface PolicyOutputs {
  /** [B, R] log π(response token). */
  logProbs: Tensor;
  /** [B, R] entropy of each position's distribution (when asked for). */
  entropy?: Tensor;
}

/**
 * Log-probs (and entropies) of the rows' response tokens. Logits are divided by the
 * sampling temperature first, as verl does, and the family's vision ids are out of the
 * distribution, as the engine never samples them (src/engine/sampler.ts), so the numbers
 * are those of the distribution the engine sampled from.
 */
export function policyForward(model: TrainingModel, rows: readonly TrainingRow[], opts: { temperature: number; chunkTokens: number; withEntropy: boolean }): PolicyOutputs {
  return torch.tidy(() => {
    const { hidden, packed } = model.responseHidden(rows);
    const tokens = rowsTensor(rows.map((r) => r.responseIds), packed.responseWidth, { dtype: "i64", device: model.device });
    const logits = model.logits(hidden);
    return tokenLogProbs(logits, tokens, { temperature: opts.temperature, chunkTokens: opts.chunkTokens, withEntropy: opts.withEntropy, neverSampled: model.family.visionTokenIds });
  });
}

/** [B, R] critic values of the rows' response positions, in float32. */
export function valueForward(model: TrainingModel, head: ValueHead, rows: readonly TrainingRow[]): Tensor {
  return torch.tidy(() => {
    const { hidden } = model.responseHidden(rows);
    return head.forward(hidden).to({ dtype: "f32" });
  });
}
