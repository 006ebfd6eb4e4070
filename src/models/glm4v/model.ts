/**
 * GLM-4V for vagen: a config, a weight map, the vision tower and the language model, as
 * separate differentiable pieces the engine and the trainer compose:
 *
 *   encodeImages(pixelValues, gridThw)   -> (numImageTokens, hidden) image features
 *   embed(inputIds)                      -> (B, T, hidden)
 *   scatterAtImageTokens(ids, base, f)   -> (B, T, hidden): f at image tokens, base elsewhere
 *   positionIds(inputIds, mask, gridThw) -> (3, B, T) M-RoPE positions
 *   forward({inputsEmbeds, positionIds, attentionMask | attention}) -> (B, T, hidden)
 *
 * `forwardBatch` chains them for a padded batch.
 */
import * as torch from "../../torch/index.ts";
import { dims2, type DType, type Device, type Tensor } from "../../torch/index.ts";
import { VagenError } from "../../core/errors.ts";
import { idsTensor } from "../batch.ts";
import type { DecoderInput } from "../decoder.ts";
import { ValueHead } from "../value-head.ts";
import { loadWeights, type Weights } from "../weights.ts";
import { checkImageTokens } from "../qwen2_5_vl/processor.ts";
import { computeRopeIndex } from "../qwen2_5_vl/rope-index.ts";
import { loadGlm4vConfig, type Glm4vConfig } from "./config.ts";
import { Glm4vTextModel } from "./text.ts";
import { Glm4vVisionTower } from "./vision.ts";
import { canonicalGlm4vName, checkGlm4vWeights } from "./weights.ts";

export interface LoadOptions {
  device: Device;
  dtype: DType;
}

/** A padded batch: row-major ids, 0/1 mask, and the images of all rows in order. */
export interface MultimodalBatch {
  inputIds: number[][];
  attentionMask?: number[][];
  /** (numPatches, patchDim) for all images of the batch, or undefined without images. */
  pixelValues?: Tensor;
  imageGridThw?: number[][];
}

export class Glm4vModel {
  readonly family = "glm4v";
  readonly vision: Glm4vVisionTower;
  readonly text: Glm4vTextModel;

  constructor(
    readonly config: Glm4vConfig,
    readonly weights: Weights,
    readonly device: Device,
    readonly dtype: DType,
  ) {
    this.vision = new Glm4vVisionTower(config.vision, weights);
    this.text = new Glm4vTextModel(config.text, weights);
  }

  static load(dir: string, opts: LoadOptions): Glm4vModel {
    const config = loadGlm4vConfig(dir);
    const weights = loadWeights(dir, { ...opts, rename: canonicalGlm4vName });
    try {
      checkGlm4vWeights(weights, config, dir);
      return new Glm4vModel(config, weights, opts.device, opts.dtype);
    } catch (err) {
      for (const t of weights.values()) t.dispose();
      throw err;
    }
  }

  encodeImages(pixelValues: Tensor, gridThw: readonly (readonly number[])[]): Tensor {
    return this.vision.encode(pixelValues, gridThw);
  }

  /** (B, T) ids as a host array or an int64 tensor -> (B, T, hidden). */
  embed(inputIds: number[][] | Tensor): Tensor {
    if (!Array.isArray(inputIds)) return this.text.embed(inputIds);
    return torch.tidy(() => this.text.embed(idsTensor(inputIds, this.device)));
  }

  /**
   * `features` rows at the image-token positions (row-major order), `base` elsewhere: one
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
      throw new VagenError(`image features and image tokens do not match: ${k} image token(s) in the batch, ${nFeatures} image feature(s)`);
    }
    return torch.tidy(() => {
      const table = torch.cat([base.reshape([B * T, H]), features.to(base.dtype)], 0);
      return table.indexSelect(0, torch.tensor(source, [B * T], { dtype: "i64", device: this.device })).reshape([B, T, H]);
    });
  }

  /**
   * M-RoPE position ids (3, B, T) of a padded batch: transformers' Glm4vModel.get_rope_index
   * for still images is Qwen2-VL's layout (text one step on every axis; an image's merged
   * grid laid out from the current position; text after it resumes at current + max(h, w)).
   */
  positionIds(inputIds: number[][], attentionMask: number[][] | undefined, gridThw: number[][]): Tensor {
    const { positionIds } = computeRopeIndex({
      inputIds,
      attentionMask,
      imageGridThw: gridThw,
      imageTokenId: this.config.imageTokenId,
      spatialMergeSize: this.config.vision.spatialMergeSize,
    });
    const T = inputIds[0]?.length ?? 0;
    const flat = new Float64Array(3 * inputIds.length * T);
    let o = 0;
    for (const axis of positionIds) for (const row of axis) for (const p of row) flat[o++] = p;
    return torch.tensor(flat, [3, inputIds.length, T], { dtype: "i64", device: this.device });
  }

  forward(input: DecoderInput): Tensor {
    return this.text.forward(input);
  }

  logits(hidden: Tensor): Tensor {
    return this.text.logits(hidden);
  }

  /**
   * Embed, encode the images, merge their features, compute positions and run the decoder
   * on a padded batch with causal attention over it (differentiable when gradients are
   * on): final-normed hidden states (B, T, hidden).
   */
  forwardBatch(batch: MultimodalBatch, opts: { mathAttention?: boolean } = {}): Tensor {
    const grids = batch.imageGridThw ?? [];
    checkImageTokens(batch.inputIds, grids, this.config.imageTokenId, this.config.vision.spatialMergeSize);
    if (grids.length > 0 && !batch.pixelValues) {
      throw new VagenError("the batch has image grids but no pixel values: a VLM forward without its images is refused");
    }
    return torch.tidy(() => {
      const embeds = this.embed(batch.inputIds);
      const inputsEmbeds = batch.pixelValues && grids.length > 0 ? this.scatterAtImageTokens(batch.inputIds, this.encodeImages(batch.pixelValues, grids), embeds) : embeds;
      const positionIds = this.positionIds(batch.inputIds, batch.attentionMask, grids);
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
