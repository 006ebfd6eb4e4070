/**
 * Qwen3-VL for vagen: a config, a weight map, the vision tower and the language model,
 * as separate differentiable pieces the engine and the trainer compose:
 *
 *   encodeImages(pixelValues, gridThw)  -> features and deepstack levels, (numImageTokens, hidden) each
 *   embed(inputIds)                     -> (B, T, hidden)
 *   scatterAtImageTokens(ids, base, f)  -> (B, T, hidden): f at image pads, base elsewhere
 *   positionIds(inputIds, mask, gridThw) -> (3, B, T) interleaved M-RoPE positions
 *   forward({inputsEmbeds, positionIds, layerResiduals, attentionMask | attention}) -> (B, T, hidden)
 *
 * `forwardBatch` chains them for a padded batch: image features replace the pad
 * embeddings, and deepstack level j, zero at text tokens, is added after decoder layer j.
 */
import * as torch from "../../torch/index.ts";
import { dims2, type DType, type Device, type Tensor } from "../../torch/index.ts";
import { VagenError } from "../../core/errors.ts";
import { idsTensor } from "../batch.ts";
import type { DecoderInput } from "../decoder.ts";
import { ValueHead } from "../value-head.ts";
import { loadWeights, type Weights } from "../weights.ts";
import { checkImageTokens } from "../qwen2_5_vl/processor.ts";
import { loadQwen3VLConfig, type Qwen3VLConfig } from "./config.ts";
import { computeRopeIndex } from "./rope-index.ts";
import { Qwen3VLTextModel } from "./text.ts";
import { Qwen3VLVisionTower, type VisionFeatures } from "./vision.ts";
import { canonicalQwen3VLName, checkQwen3VLWeights } from "./weights.ts";

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

export class Qwen3VLModel {
  readonly family = "qwen3_vl";
  readonly vision: Qwen3VLVisionTower;
  readonly text: Qwen3VLTextModel;

  constructor(
    readonly config: Qwen3VLConfig,
    readonly weights: Weights,
    readonly device: Device,
    readonly dtype: DType,
  ) {
    this.vision = new Qwen3VLVisionTower(config.vision, weights);
    this.text = new Qwen3VLTextModel(config.text, weights);
  }

  static load(dir: string, opts: LoadOptions): Qwen3VLModel {
    const config = loadQwen3VLConfig(dir);
    const weights = loadWeights(dir, { ...opts, rename: canonicalQwen3VLName });
    try {
      checkQwen3VLWeights(weights, config, dir);
    } catch (err) {
      for (const t of weights.values()) t.dispose();
      throw err;
    }
    return new Qwen3VLModel(config, weights, opts.device, opts.dtype);
  }

  encodeImages(pixelValues: Tensor, gridThw: readonly (readonly number[])[]): VisionFeatures {
    return this.vision.encode(pixelValues, gridThw);
  }

  /** (B, T) ids as a host array or an int64 tensor -> (B, T, hidden). */
  embed(inputIds: number[][] | Tensor): Tensor {
    if (!Array.isArray(inputIds)) return this.text.embed(inputIds);
    return torch.tidy(() => this.text.embed(idsTensor(inputIds, this.device)));
  }

  /**
   * `features` rows at the image-pad positions (row-major order), `base` elsewhere, or
   * zeros elsewhere when `base` is omitted: one differentiable gather from
   * [base or a zero row; features]. The counts must agree exactly.
   */
  scatterAtImageTokens(inputIds: readonly (readonly number[])[], features: Tensor, base?: Tensor): Tensor {
    const B = inputIds.length;
    const T = inputIds[0]?.length ?? 0;
    const H = this.config.text.hiddenSize;
    const imageId = this.config.imageTokenId;
    const baseRows = base ? B * T : 1;
    const source = new Int32Array(B * T);
    let k = 0;
    for (let b = 0; b < B; b++) {
      for (let t = 0; t < T; t++) source[b * T + t] = inputIds[b]![t] === imageId ? baseRows + k++ : base ? b * T + t : 0;
    }
    const [nFeatures] = dims2(features, "image features");
    if (k !== nFeatures) {
      throw new VagenError(`image features and image tokens do not match: ${k} image token(s) in the batch, ${nFeatures} image feature(s)`);
    }
    return torch.tidy(() => {
      const dtype = base?.dtype ?? this.dtype;
      const head = base ? base.reshape([B * T, H]) : torch.zeros([1, H], { dtype, device: this.device });
      const table = torch.cat([head, features.to(dtype)], 0);
      return table.indexSelect(0, torch.tensor(source, [B * T], { dtype: "i64", device: this.device })).reshape([B, T, H]);
    });
  }

  /** Interleaved M-RoPE position ids (3, B, T) of a padded batch. */
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
   * Embed, encode the images, merge their features and deepstack levels, compute positions
   * and run the decoder on a padded batch with causal attention over it (differentiable
   * when gradients are on): final-normed hidden states (B, T, hidden).
   */
  forwardBatch(batch: MultimodalBatch, opts: { mathAttention?: boolean } = {}): Tensor {
    const grids = batch.imageGridThw ?? [];
    checkImageTokens(batch.inputIds, grids, this.config.imageTokenId, this.config.vision.spatialMergeSize);
    if (grids.length > 0 && !batch.pixelValues) {
      throw new VagenError("the batch has image grids but no pixel values: a VLM forward without its images is refused");
    }
    return torch.tidy(() => {
      const embeds = this.embed(batch.inputIds);
      let inputsEmbeds = embeds;
      let layerResiduals: Tensor[] | undefined;
      if (batch.pixelValues && grids.length > 0) {
        const { features, deepstack } = this.encodeImages(batch.pixelValues, grids);
        inputsEmbeds = this.scatterAtImageTokens(batch.inputIds, features, embeds);
        layerResiduals = deepstack.map((level) => this.scatterAtImageTokens(batch.inputIds, level));
      }
      const positionIds = this.positionIds(batch.inputIds, batch.attentionMask, grids);
      const attentionMask = batch.attentionMask ? idsTensor(batch.attentionMask, this.device) : undefined;
      return this.forward({ inputsEmbeds, positionIds, attentionMask, mathAttention: opts.mathAttention, layerResiduals });
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
