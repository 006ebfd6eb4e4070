/**
 * Qwen3 (text) for vagen: a config, a weight map and the shared decoder (decoder.ts with
 * per-head q/k RMSNorm, no biases, plain RoPE), as separate differentiable pieces:
 *
 *   embed(inputIds)                          -> (B, T, hidden)
 *   positionIds(B, T, mask)                  -> (1, B, T) positions, each row from 0
 *   forward({inputsEmbeds, positionIds, attentionMask | attention}) -> hidden (B, T, hidden)
 *   logits(hidden)                           -> (B, T, vocab)
 *
 * `forwardBatch` chains them for a padded batch of token rows.
 */
import * as torch from "../../torch/index.ts";
import type { DType, Device, Tensor } from "../../torch/index.ts";
import { idsTensor, textPositions } from "../batch.ts";
import { Decoder, type DecoderInput } from "../decoder.ts";
import { loadWeights, type Weights } from "../weights.ts";
import { loadQwen3Config, type Qwen3Config } from "./config.ts";
import { canonicalQwen3Name, checkQwen3Weights } from "./weights.ts";

export interface Qwen3LoadOptions {
  device: Device;
  dtype: DType;
}

/** A padded batch of token rows: row-major ids and a 0/1 mask (omitted: no padding). */
export interface TextBatch {
  inputIds: readonly (readonly number[])[];
  attentionMask?: readonly (readonly number[])[];
}

export class Qwen3Model {
  readonly family = "qwen3";
  readonly decoder: Decoder;

  constructor(
    readonly config: Qwen3Config,
    readonly weights: Weights,
    readonly device: Device,
    readonly dtype: DType,
  ) {
    this.decoder = new Decoder(config.decoder, weights, "Qwen3 language model");
  }

  static load(dir: string, opts: Qwen3LoadOptions): Qwen3Model {
    const config = loadQwen3Config(dir);
    const weights = loadWeights(dir, { ...opts, rename: (name) => canonicalQwen3Name(name, config.decoder) });
    try {
      checkQwen3Weights(weights, config.decoder, dir);
      return new Qwen3Model(config, weights, opts.device, opts.dtype);
    } catch (err) {
      for (const t of weights.values()) t.dispose();
      throw err;
    }
  }

  /** (B, T) int64 ids -> (B, T, hidden). */
  embed(inputIds: Tensor): Tensor {
    return this.decoder.embed(inputIds);
  }

  /** (1, B, T) int64 positions of a padded batch (batch.ts: each row's real tokens from 0). */
  positionIds(B: number, T: number, attentionMask?: readonly (readonly number[])[]): Tensor {
    return idsTensor(textPositions(T, attentionMask, B), this.device).unsqueeze(0);
  }

  forward(input: DecoderInput): Tensor {
    return this.decoder.forward(input);
  }

  logits(hidden: Tensor): Tensor {
    return this.decoder.logits(hidden);
  }

  /** Embed, position and run the decoder with causal attention over the batch (differentiable when gradients are on). */
  forwardBatch(batch: TextBatch, opts: { mathAttention?: boolean } = {}): Tensor {
    const B = batch.inputIds.length;
    const T = batch.inputIds[0]?.length ?? 0;
    return torch.tidy(() => {
      const embeds = this.embed(idsTensor(batch.inputIds, this.device));
      const positionIds = this.positionIds(B, T, batch.attentionMask);
      const attentionMask = batch.attentionMask ? idsTensor(batch.attentionMask, this.device) : undefined;
      return this.forward({ inputsEmbeds: embeds, positionIds, attentionMask, mathAttention: opts.mathAttention });
    });
  }

  dispose(): void {
    this.decoder.dispose();
    for (const t of this.weights.values()) t.dispose();
    this.weights.clear();
  }
}
