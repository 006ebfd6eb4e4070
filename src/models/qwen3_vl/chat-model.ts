/**
 * Qwen3-VL as a `ModelFamily` (family.ts): the tokenizer, chat template and image
 * processor of a model directory, and the model's pieces behind the seam the engine,
 * the trainer and the CLI use.
 *
 *   prompts     buildPrompt (chat messages -> ids and image spans, pixels left for later),
 *               conversationCodec (token-level conversations)
 *   engine      promptPositions (interleaved M-RoPE), promptInputs (images through the
 *               vision tower once each: embeddings, and the deepstack levels as per-layer
 *               residuals), embedTokens, forward over an AttentionBackend, logits
 *   training    forwardForTraining (a padded batch, causal attention, differentiable)
 *
 * Prompts are built as Qwen2.5-VL builds them (one `<|image_pad|>` per image in the
 * rendered template, expanded to the image's merged-token count), so the processor and
 * the conversation codec are shared; images only, no video.
 */
import { existsSync } from "node:fs";
import { basename, join, resolve } from "node:path";
import type { ChatMessage } from "../../core/chat.ts";
import { VagenError } from "../../core/errors.ts";
import * as torch from "../../torch/index.ts";
import type { DType, Device, Tensor } from "../../torch/index.ts";
import { validate } from "../../config/index.ts";
import type { AttentionBackend } from "../attention.ts";
import { ChatTemplate } from "../chat-template.ts";
import type { ConversationCodec } from "../conversation.ts";
import { chatEosTokenIds, generationEosTokenIds } from "../eos.ts";
import type { LoadModelOptions, ModelFamily, ModelSpec, PromptInputs, TrainingBatch, TrainingForwardOptions } from "../family.ts";
import {
  imageProcessorOptions,
  checkRowImageTokens,
  PreprocessorConfigSchema,
  processImages,
  type ImageProcessorOptions,
} from "../image-processor.ts";
import { processImagesCached } from "../patch-cache.ts";
import type { Prompt, PromptImage } from "../prompt.ts";
import { readJson, TextTokenizer } from "../tokenizer.ts";
import { Qwen25VLConversationCodec } from "../qwen2_5_vl/conversation-codec.ts";
import { Qwen25VLProcessor } from "../qwen2_5_vl/processor.ts";
import { Qwen3VLModel } from "./model.ts";
import { computeRopeIndex } from "./rope-index.ts";
import { isQwen3VLVisionWeight } from "./weights.ts";

export const QWEN3_VL_FAMILY = "qwen3_vl";

/**
 * Qwen3-VL's image processor when a directory has no preprocessor_config.json: the
 * published checkpoints' (patch 16, merge 2, mean and std 0.5, 65536 to 16777216 pixels).
 */
export const QWEN3_VL_IMAGE_PROCESSOR: ImageProcessorOptions = {
  patchSize: 16,
  temporalPatchSize: 2,
  mergeSize: 2,
  minPixels: 65536,
  maxPixels: 16777216,
  mean: [0.5, 0.5, 0.5],
  std: [0.5, 0.5, 0.5],
  rescaleFactor: 1 / 255,
  doResize: true,
  doRescale: true,
  doNormalize: true,
};

export interface Qwen3VLChatModelOptions {
  /** generation_config.json's end-of-sequence ids, added to the model's own. */
  generationEosTokenIds?: readonly number[];
  /** The name clients use for the model; default "qwen3_vl". */
  modelName?: string;
  /** Extra chat template variables (add_vision_id, ...). */
  templateVariables?: Readonly<Record<string, unknown>>;
}

export class Qwen3VLChatModel implements ModelFamily {
  readonly family = QWEN3_VL_FAMILY;
  readonly modelName: string;
  readonly processor: Qwen25VLProcessor;
  readonly eosTokenIds: readonly number[];
  readonly spec: ModelSpec;
  readonly tokenBytes: ((id: number) => Uint8Array) | undefined;
  readonly visionTokenIds: readonly number[];
  /** Images that went through the vision tower for the engine (for stats and tests). */
  imagesEncoded = 0;

  constructor(
    readonly model: Qwen3VLModel,
    readonly tokenizer: TextTokenizer,
    template: ChatTemplate,
    readonly imageOptions: ImageProcessorOptions,
    opts: Qwen3VLChatModelOptions = {},
  ) {
    this.modelName = opts.modelName ?? this.family;
    this.processor = new Qwen25VLProcessor(tokenizer, template, imageOptions, model.config.imageTokenId, opts.templateVariables);
    this.eosTokenIds = chatEosTokenIds(tokenizer, model.config.eosTokenIds, opts.generationEosTokenIds ?? []);
    this.tokenBytes = tokenizer.tokenBytes();
    this.spec = specOf(model);
    const markers = ["<|vision_start|>", "<|vision_end|>", "<|video_pad|>"].flatMap((t) => tokenizer.maybeTokenId(t) ?? []);
    this.visionTokenIds = [model.config.imageTokenId, ...markers];
  }

  static load(dir: string, opts: LoadModelOptions): Qwen3VLChatModel {
    const model = Qwen3VLModel.load(dir, opts);
    try {
      const tokenizer = TextTokenizer.fromDir(dir);
      const template = ChatTemplate.fromDir(dir);
      const ppPath = join(dir, "preprocessor_config.json");
      const imageOptions = existsSync(ppPath)
        ? imageProcessorOptions(validate(PreprocessorConfigSchema, { ...QWEN3_VL_PREPROCESSOR_DEFAULTS, ...readJson(ppPath) }, { file: ppPath }))
        : QWEN3_VL_IMAGE_PROCESSOR;
      const vision = model.config.vision;
      if (imageOptions.patchSize !== vision.patchSize || imageOptions.mergeSize !== vision.spatialMergeSize || imageOptions.temporalPatchSize !== vision.temporalPatchSize) {
        throw new VagenError(
          `${ppPath}: patch_size ${imageOptions.patchSize}, merge_size ${imageOptions.mergeSize}, temporal_patch_size ${imageOptions.temporalPatchSize} disagree with config.json's vision_config (${vision.patchSize}, ${vision.spatialMergeSize}, ${vision.temporalPatchSize})`,
        );
      }
      return new Qwen3VLChatModel(model, tokenizer, template, imageOptions, {
        generationEosTokenIds: generationEosTokenIds(dir),
        modelName: basename(resolve(dir)),
        templateVariables: opts.chatTemplateVariables,
      });
    } catch (err) {
      model.dispose();
      throw err;
    }
  }

  get device(): Device {
    return this.model.device;
  }

  get dtype(): DType {
    return this.model.dtype;
  }

  get weights(): Map<string, Tensor> {
    return this.model.weights;
  }

  // ---- prompts ---------------------------------------------------------------------------

  buildPrompt(messages: readonly ChatMessage[]): Prompt {
    return this.processor.buildPrompt(messages);
  }

  decode(ids: readonly number[]): string {
    return this.tokenizer.decode(ids, { skipSpecialTokens: true });
  }

  conversationCodec(): ConversationCodec {
    return new Qwen25VLConversationCodec(this.processor);
  }

  // ---- what the engine runs --------------------------------------------------------------

  promptPositions(prompt: Prompt): number[][] {
    const { positionIds } = computeRopeIndex({
      inputIds: [prompt.tokenIds],
      imageGridThw: prompt.images.map(gridOf),
      imageTokenId: this.model.config.imageTokenId,
      spatialMergeSize: this.model.config.vision.spatialMergeSize,
    });
    return positionIds.map((axis) => axis[0]!);
  }

  embedPrompt(prompt: Prompt, from: number): Tensor {
    const { embeds, layerResiduals } = this.promptInputs(prompt, from);
    for (const t of layerResiduals ?? []) t.dispose();
    return embeds;
  }

  /**
   * Embeddings of tokens [from, end) and, when an image overlaps them, the deepstack
   * levels at its tokens (zero elsewhere). Pixels are processed only here, for the images
   * that reach the range, so those a session's cached prefix holds cost nothing.
   */
  promptInputs(prompt: Prompt, from: number): PromptInputs {
    const { device, hiddenSize } = this.spec;
    const ids = prompt.tokenIds.slice(from);
    const n = ids.length;
    const embeds = this.model.text.embed(torch.tensor(Float64Array.from(ids), [n], { dtype: "i64", device }));
    let layerResiduals: Tensor[] | undefined;
    for (const image of prompt.images) {
      const lo = Math.max(image.offset, from);
      const hi = image.offset + image.length;
      if (hi <= lo) continue;
      const processed = processImages([image.image], this.imageOptions);
      const pixels = torch.tensor(processed.pixelValues, [processed.numPatches, processed.patchDim], { device });
      const { features, deepstack } = this.model.encodeImages(pixels, [gridOf(image)]);
      this.imagesEncoded++;
      const rows = (t: Tensor) => t.narrow(0, lo - image.offset, hi - lo).to(embeds.dtype);
      embeds.narrow(0, lo - from, hi - lo).copy_(rows(features));
      layerResiduals ??= deepstack.map(() => torch.zeros([n, hiddenSize], { dtype: embeds.dtype, device }));
      deepstack.forEach((level, j) => layerResiduals![j]!.narrow(0, lo - from, hi - lo).copy_(rows(level)));
    }
    return { embeds: embeds.view(n, hiddenSize), layerResiduals };
  }

  embedTokens(ids: Tensor): Tensor {
    return this.model.text.embed(ids);
  }

  forward(inputsEmbeds: Tensor, positions: Tensor, attention: AttentionBackend, layerResiduals?: readonly Tensor[]): Tensor {
    return this.model.text.forward({ inputsEmbeds, positionIds: positions, attention, layerResiduals });
  }

  logits(hidden: Tensor): Tensor {
    return this.model.logits(hidden);
  }

  // ---- training --------------------------------------------------------------------------

  forwardForTraining(batch: TrainingBatch, opts: TrainingForwardOptions = {}): Tensor {
    if (batch.images.length !== batch.inputIds.length) {
      throw new VagenError(`training batch: ${batch.inputIds.length} rows of ids but ${batch.images.length} rows of images`);
    }
    const images = batch.images.flat();
    // A training step forwards the same images several times: their patches are made once.
    const processed = images.length > 0 ? processImagesCached(images, this.imageOptions) : undefined;
    checkRowImageTokens(batch, processed?.gridThw ?? [], this.model.config.imageTokenId, this.imageOptions.mergeSize);
    return torch.tidy(() =>
      this.model.forwardBatch(
        {
          inputIds: batch.inputIds as number[][],
          attentionMask: batch.attentionMask as number[][] | undefined,
          pixelValues: processed && torch.tensor(processed.pixelValues, [processed.numPatches, processed.patchDim], { device: this.device }),
          imageGridThw: processed?.gridThw ?? [],
        },
        { mathAttention: opts.mathAttention },
      ),
    );
  }


  isVisionWeight(name: string): boolean {
    return isQwen3VLVisionWeight(name);
  }

  dispose(): void {
    this.model.dispose();
  }
}

/** preprocessor_config.json keys Qwen3-VL's processor defaults differently from Qwen2-VL's. */
const QWEN3_VL_PREPROCESSOR_DEFAULTS = {
  patch_size: 16,
  image_mean: [0.5, 0.5, 0.5],
  image_std: [0.5, 0.5, 0.5],
} as const;

function specOf(model: Qwen3VLModel): ModelSpec {
  const c = model.config.text;
  let weightBytes = 0;
  // What a decode step reads: the language model (the vision tower only runs in prefill).
  for (const [name, t] of model.weights) if (!isQwen3VLVisionWeight(name)) weightBytes += t.nbytes();
  return {
    numLayers: c.numLayers,
    numHeads: c.numHeads,
    numKvHeads: c.numKvHeads,
    headDim: c.headDim,
    hiddenSize: c.hiddenSize,
    vocabSize: c.vocabSize,
    positionAxes: 3,
    dtype: model.dtype,
    device: model.device,
    maxPositions: c.maxPositions,
    weightBytes,
  };
}

/** An image's (t, h, w) patch grid, which fixes its placeholder count and positions. */
function gridOf(image: PromptImage): [number, number, number] {
  const grid = image.grid;
  if (!grid || grid.length !== 3) {
    throw new VagenError(`a Qwen3-VL prompt image at token ${image.offset} has no (t, h, w) patch grid (got ${JSON.stringify(grid)})`);
  }
  return [grid[0]!, grid[1]!, grid[2]!];
}
