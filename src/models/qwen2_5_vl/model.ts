/**
 * Qwen2.5-VL for vagen: a config, a weight map and the two towers, exposed as separate
 * differentiable pieces so the engine and trainer can compose them:
 *
 *   encodeImages(pixelValues, gridThw)       -> (numImageTokens, hidden) features
 *   embed(inputIds) + mergeImageFeatures(...) -> (B, T, hidden) input embeddings
 *   positionIds(inputIds, mask, gridThw)     -> (3, B, T) M-RoPE positions (+ deltas)
 *   forward({inputsEmbeds, positionIds, attentionMask | attention}) -> hidden (B, T, hidden)
 *   logits(hidden) / values(hidden, head)    -> (B, T, vocab) / (B, T)
 *
 * `forwardBatch` chains them for a padded batch of mixed text and image prompts.
 */
import * as torch from "../../torch/index.ts";
import { dims2, dims3, type DType, type Device, type Tensor } from "../../torch/index.ts";
import { VagenError } from "../../core/errors.ts";
import { idsTensor } from "../batch.ts";
import { loadWeights, type Weights } from "../weights.ts";
import { loadQwen25VLConfig, type Qwen25VLConfig } from "./config.ts";
import { checkImageTokens } from "./processor.ts";
import { computeRopeIndex } from "./rope-index.ts";
import { Qwen25TextModel, type DecoderInput } from "./text.ts";
import { Qwen25VisionTower } from "./vision.ts";
import { canonicalQwen25VLName, checkQwen25VLWeights } from "./weights.ts";
import { ValueHead } from "../value-head.ts";

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

export interface BatchForward {
  hidden: Tensor;
  positionIds: Tensor;
  /** Per row: the position the next generated token takes on all three axes. */
  nextPositions: number[];
}

export class Qwen25VLModel {
  readonly family = "qwen2_5_vl";
  readonly vision: Qwen25VisionTower;
  readonly text: Qwen25TextModel;

  constructor(
    readonly config: Qwen25VLConfig,
    readonly weights: Weights,
    readonly device: Device,
    readonly dtype: DType,
  ) {
    this.vision = new Qwen25VisionTower(config.vision, weights);
    this.text = new Qwen25TextModel(config.text, weights);
  }

  static load(dir: string, opts: LoadOptions): Qwen25VLModel {
    const config = loadQwen25VLConfig(dir);
    const weights = loadWeights(dir, { ...opts, rename: canonicalQwen25VLName });
    checkQwen25VLWeights(weights, config, dir);
    return new Qwen25VLModel(config, weights, opts.device, opts.dtype);
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
   * Put image features at the image-pad positions (row-major order), differentiably:
   * one gather from [embeddings; features]. The counts must agree exactly.
   */
  mergeImageFeatures(inputIds: readonly (readonly number[])[], inputsEmbeds: Tensor, features: Tensor | undefined): Tensor {
    const [B, T, H] = dims3(inputsEmbeds, "input embeddings");
    const imageId = this.config.imageTokenId;
    const source = new Int32Array(B * T);
    let k = 0;
    for (let b = 0; b < B; b++) {
      for (let t = 0; t < T; t++) {
        source[b * T + t] = inputIds[b]![t] === imageId ? B * T + k++ : b * T + t;
      }
    }
    const nFeatures = features ? dims2(features, "image features")[0] : 0;
    if (k !== nFeatures) {
      throw new VagenError(
        `image features and image tokens do not match: ${k} image token(s) in the batch, ${nFeatures} image feature(s)`,
        nFeatures === 0 ? "the prompt has image tokens but no images were given: a VLM forward without its images is refused" : undefined,
      );
    }
    if (!features) return inputsEmbeds;
    return torch.tidy(() => {
      const table = torch.cat([inputsEmbeds.reshape([B * T, H]), features.to(inputsEmbeds.dtype)], 0);
      return table.indexSelect(0, torch.tensor(source, [B * T], { dtype: "i64", device: this.device })).reshape([B, T, H]);
    });
  }

  /** M-RoPE position ids (3, B, T) and each row's next decode position. */
  positionIds(inputIds: number[][], attentionMask: number[][] | undefined, gridThw: number[][]): { positionIds: Tensor; nextPositions: number[] } {
    const { positionIds, ropeDeltas } = computeRopeIndex({
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
    return {
      positionIds: torch.tensor(flat, [3, inputIds.length, T], { dtype: "i64", device: this.device }),
      nextPositions: ropeDeltas.map((d) => T + d),
    };
  }

  forward(input: DecoderInput): Tensor {
    return this.text.forward(input);
  }

  logits(hidden: Tensor): Tensor {
    return this.text.logits(hidden);
  }

  values(hidden: Tensor, head: ValueHead): Tensor {
    return head.forward(hidden);
  }

  /**
   * Embed, encode and merge images, compute positions and run the decoder on a padded
   * batch, with causal attention over it (differentiable when gradients are on).
   */
  forwardBatch(batch: MultimodalBatch, opts: { mathAttention?: boolean } = {}): BatchForward {
    const grids = batch.imageGridThw ?? [];
    checkImageTokens(batch.inputIds, grids, this.config.imageTokenId, this.config.vision.spatialMergeSize);
    if (grids.length > 0 && !batch.pixelValues) {
      throw new VagenError("the batch has image grids but no pixel values: a VLM forward without its images is refused");
    }
    return torch.tidy(() => {
      const features = batch.pixelValues && grids.length ? this.encodeImages(batch.pixelValues, grids) : undefined;
      const embeds = this.mergeImageFeatures(batch.inputIds, this.embed(batch.inputIds), features);
      const { positionIds, nextPositions } = this.positionIds(batch.inputIds, batch.attentionMask, grids);
      const attentionMask = batch.attentionMask ? idsTensor(batch.attentionMask, this.device) : undefined;
      const hidden = this.forward({ inputsEmbeds: embeds, positionIds, attentionMask, mathAttention: opts.mathAttention });
      return { hidden, positionIds, nextPositions };
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
