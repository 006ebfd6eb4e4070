/**
 * InternVL for vagen: a config, a weight map, the vision side (InternViT, pixel shuffle,
 * projector) and the Qwen3 language model on the shared decoder, as separate
 * differentiable pieces the engine and the trainer compose:
 *
 *   encodeTiles(pixelValues (N, 3, S, S))  -> (N * tokensPerTile, hidden)
 *   embed(inputIds)                        -> (B, T, hidden)
 *   scatterAtImageTokens(ids, f, base)     -> (B, T, hidden): f at <IMG_CONTEXT>, base elsewhere
 *   positionIds(B, T, mask)                -> (1, B, T): one rotary axis, each row from 0
 *   forward({inputsEmbeds, positionIds, attentionMask | attention}) -> (B, T, hidden)
 *
 * `forwardBatch` chains them for a padded batch.
 */
import * as torch from "../../torch/index.ts";
import { dims2, type DType, type Device, type Tensor } from "../../torch/index.ts";
import { VagenError } from "../../core/errors.ts";
import { idsTensor, textPositions } from "../batch.ts";
import { Decoder, type DecoderInput } from "../decoder.ts";
import { ValueHead } from "../value-head.ts";
import { loadWeights, type Weights } from "../weights.ts";
import { loadInternVLConfig, type InternVLConfig } from "./config.ts";
import { InternVLVisionTower } from "./vision.ts";
import { canonicalInternVLName, checkInternVLWeights } from "./weights.ts";

export interface LoadOptions {
  device: Device;
  dtype: DType;
}

/** A padded batch: row-major ids, a 0/1 mask, and every row's image tiles in placeholder order. */
export interface InternVLBatch {
  inputIds: readonly (readonly number[])[];
  attentionMask?: readonly (readonly number[])[];
  /** (tiles, 3, S, S) of all images of the batch, or undefined without images. */
  pixelValues?: Tensor;
}

export class InternVLModel {
  readonly family = "internvl";
  readonly vision: InternVLVisionTower;
  readonly text: Decoder;

  constructor(
    readonly config: InternVLConfig,
    readonly weights: Weights,
    readonly device: Device,
    readonly dtype: DType,
  ) {
    this.vision = new InternVLVisionTower(config, weights);
    this.text = new Decoder(config.text, weights, "InternVL language model");
  }

  static load(dir: string, opts: LoadOptions): InternVLModel {
    const config = loadInternVLConfig(dir);
    const weights = loadWeights(dir, { ...opts, rename: (name) => canonicalInternVLName(name, config.text.tieWordEmbeddings) });
    try {
      checkInternVLWeights(weights, config, dir);
      return new InternVLModel(config, weights, opts.device, opts.dtype);
    } catch (err) {
      for (const t of weights.values()) t.dispose();
      throw err;
    }
  }

  encodeTiles(pixelValues: Tensor): Tensor {
    return this.vision.encode(pixelValues);
  }

  /** (B, T) ids as a host array or an int64 tensor -> (B, T, hidden). */
  embed(inputIds: readonly (readonly number[])[] | Tensor): Tensor {
    if (!Array.isArray(inputIds)) return this.text.embed(inputIds as Tensor);
    return torch.tidy(() => this.text.embed(idsTensor(inputIds as readonly (readonly number[])[], this.device)));
  }

  /**
   * `features` rows at the image tokens (row-major order), `base` elsewhere: one
   * differentiable gather from [base; features]. The counts must agree exactly.
   */
  scatterAtImageTokens(inputIds: readonly (readonly number[])[], features: Tensor, base: Tensor): Tensor {
    const B = inputIds.length;
    const T = inputIds[0]?.length ?? 0;
    const H = this.config.text.hiddenSize;
    const imageId = this.config.imageTokenId;
    const source = new Int32Array(B * T);
    let k = 0;
    for (let b = 0; b < B; b++) {
      for (let t = 0; t < T; t++) source[b * T + t] = inputIds[b]![t] === imageId ? B * T + k++ : b * T + t;
    }
    const [nFeatures] = dims2(features, "image features");
    if (k !== nFeatures) {
      throw new VagenError(`image features and image tokens do not match: ${k} <IMG_CONTEXT> token(s) in the batch, ${nFeatures} image feature(s)`);
    }
    return torch.tidy(() => {
      const table = torch.cat([base.reshape([B * T, H]), features.to(base.dtype)], 0);
      return table.indexSelect(0, torch.tensor(source, [B * T], { dtype: "i64", device: this.device })).reshape([B, T, H]);
    });
  }

  /** (1, B, T) int64 positions of a padded batch (batch.ts: each row's real tokens from 0). */
  positionIds(B: number, T: number, attentionMask?: readonly (readonly number[])[]): Tensor {
    return idsTensor(textPositions(T, attentionMask, B), this.device).unsqueeze(0);
  }

  forward(input: DecoderInput): Tensor {
    return this.text.forward(input);
  }

  logits(hidden: Tensor): Tensor {
    return this.text.logits(hidden);
  }

  /**
   * Embed, encode the tiles and put their features at the image tokens, then run the
   * decoder with causal attention over the batch (differentiable when gradients are on):
   * final-normed hidden states (B, T, hidden).
   */
  forwardBatch(batch: InternVLBatch, opts: { mathAttention?: boolean } = {}): Tensor {
    const B = batch.inputIds.length;
    const T = batch.inputIds[0]?.length ?? 0;
    const imageTokens = batch.inputIds.reduce((n, row) => n + row.filter((id) => id === this.config.imageTokenId).length, 0);
    if (imageTokens > 0 && !batch.pixelValues) {
      throw new VagenError(
        `the token ids hold ${imageTokens} image token(s) but no images were given: a VLM forward without its images is refused`,
        "pass the images that the prompt's <IMG_CONTEXT> tokens stand for",
      );
    }
    return torch.tidy(() => {
      const embeds = this.embed(batch.inputIds);
      const inputsEmbeds = batch.pixelValues ? this.scatterAtImageTokens(batch.inputIds, this.encodeTiles(batch.pixelValues), embeds) : embeds;
      const positionIds = this.positionIds(B, T, batch.attentionMask);
      const attentionMask = batch.attentionMask ? idsTensor(batch.attentionMask, this.device) : undefined;
      return this.forward({ inputsEmbeds, positionIds, attentionMask, mathAttention: opts.mathAttention });
    });
  }

  /** A fresh value head sized for this model (the critic's scalar-per-token output). */
  newValueHead(opts: { seed?: number; std?: number } = {}): ValueHead {
    return ValueHead.init(this.config.text.hiddenSize, { device: this.device, dtype: this.dtype, ...opts });
  }

  dispose(): void {
    this.text.dispose();
    for (const t of this.weights.values()) t.dispose();
    this.weights.clear();
  }
}
