/**
 * GLM-4.1V / GLM-4.6V-Flash (model_type glm4v) as a `ModelFamily` (family.ts): the
 * tokenizer, chat template and image processor of a model directory, and the model's
 * pieces behind the seam the engine, the trainer and the CLI use.
 *
 *   prompts     buildPrompt (chat messages -> ids and image spans, pixels left for later),
 *               conversationCodec (token-level conversations)
 *   engine      promptPositions (M-RoPE), embedPrompt (images through the vision tower
 *               once each), embedTokens, forward over an AttentionBackend, logits
 *   training    forwardForTraining (a padded batch, causal attention, differentiable)
 *
 * Each image is one `<|image|>` in the rendered template, expanded to its merged-token
 * count (processor.ts); images only, no video.
 */
import { existsSync } from "node:fs";
import { basename, join, resolve } from "node:path";
import type { ChatMessage } from "../../core/chat.ts";
import { VagenError } from "../../core/errors.ts";
import * as torch from "../../torch/index.ts";
import type { DType, Device, Tensor } from "../../torch/index.ts";
import { validate } from "../../config/index.ts";
import type { AttentionBackend } from "../attention.ts";
import { ChatTemplate, toTemplateMessages } from "../chat-template.ts";
import type { ConversationCodec } from "../conversation.ts";
import { chatEosTokenIds, generationEosTokenIds } from "../eos.ts";
import type { LoadModelOptions, ModelFamily, ModelSpec, TrainingBatch, TrainingForwardOptions } from "../family.ts";
import { imageKey } from "../image-key.ts";
import { checkRowImageTokens, imageProcessorOptions, mergedTokenCount, PreprocessorConfigSchema, type ImageProcessorOptions } from "../image-processor.ts";
import type { Prompt, PromptImage } from "../prompt.ts";
import { readJson, TextTokenizer } from "../tokenizer.ts";
import { Glm4vConversationCodec } from "./conversation-codec.ts";
import { computeRopeIndex } from "../qwen2_5_vl/rope-index.ts";
import { processGlm4vImages, processGlm4vImagesCached } from "./image-processor.ts";
import { Glm4vModel } from "./model.ts";
import { Glm4vProcessor } from "./processor.ts";
import { isGlm4vVisionWeight } from "./weights.ts";

export const GLM4V_FAMILY = "glm4v";

const CLIP_MEAN = [0.48145466, 0.4578275, 0.40821073];
const CLIP_STD = [0.26862954, 0.26130258, 0.27577711];

/**
 * GLM-4V's image processor when a directory has no preprocessor_config.json:
 * transformers' Glm4vImageProcessor defaults (patch 14, merge 2, CLIP mean and std,
 * 112 * 112 to 28 * 28 * 15000 pixels over the two temporal frames).
 */
export const GLM4V_IMAGE_PROCESSOR: ImageProcessorOptions = {
  patchSize: 14,
  temporalPatchSize: 2,
  mergeSize: 2,
  minPixels: 112 * 112,
  maxPixels: 28 * 28 * 15000,
  mean: CLIP_MEAN,
  std: CLIP_STD,
  rescaleFactor: 1 / 255,
  doResize: true,
  doRescale: true,
  doNormalize: true,
};

/** preprocessor_config.json keys GLM's processor defaults differently from Qwen2-VL's. */
const GLM4V_PREPROCESSOR_DEFAULTS = {
  size: { shortest_edge: GLM4V_IMAGE_PROCESSOR.minPixels, longest_edge: GLM4V_IMAGE_PROCESSOR.maxPixels },
} as const;

export interface Glm4vChatModelOptions {
  /** generation_config.json's end-of-sequence ids, added to the model's own. */
  generationEosTokenIds?: readonly number[];
  /** The name clients use for the model; default "glm4v". */
  modelName?: string;
  /** Extra chat template variables. */
  templateVariables?: Readonly<Record<string, unknown>>;
}

export class Glm4vChatModel implements ModelFamily {
  readonly family = GLM4V_FAMILY;
  readonly modelName: string;
  readonly processor: Glm4vProcessor;
  readonly eosTokenIds: readonly number[];
  readonly spec: ModelSpec;
  readonly tokenBytes: ((id: number) => Uint8Array) | undefined;
  readonly visionTokenIds: readonly number[];
  /** Images that went through the vision tower for the engine (for stats and tests). */
  imagesEncoded = 0;

  constructor(
    readonly model: Glm4vModel,
    readonly tokenizer: TextTokenizer,
    template: ChatTemplate,
    readonly imageOptions: ImageProcessorOptions,
    opts: Glm4vChatModelOptions = {},
  ) {
    const c = model.config;
    this.modelName = opts.modelName ?? this.family;
    this.processor = new Glm4vProcessor(tokenizer, template, imageOptions, c.imageTokenId, opts.templateVariables);
    // GLM has no end-of-turn token: a turn ends where the model writes the next role header
    // (generation_config.json lists <|user|> and <|observation|>).
    const roleEnds = ["<|user|>", "<|observation|>"].flatMap((t) => tokenizer.maybeTokenId(t) ?? []);
    this.eosTokenIds = chatEosTokenIds(tokenizer, c.eosTokenIds, opts.generationEosTokenIds ?? [], roleEnds);
    this.tokenBytes = tokenizer.tokenBytes();
    this.spec = specOf(model);
    this.visionTokenIds = [c.imageTokenId, c.imageStartTokenId, c.imageEndTokenId, c.videoTokenId];
  }

  static load(dir: string, opts: LoadModelOptions): Glm4vChatModel {
    const model = Glm4vModel.load(dir, opts);
    try {
      const tokenizer = TextTokenizer.fromDir(dir);
      const template = ChatTemplate.fromDir(dir);
      const ppPath = join(dir, "preprocessor_config.json");
      const imageOptions = existsSync(ppPath)
        ? imageProcessorOptions(validate(PreprocessorConfigSchema, { ...GLM4V_PREPROCESSOR_DEFAULTS, ...readJson(ppPath) }, { file: ppPath }))
        : GLM4V_IMAGE_PROCESSOR;
      const vision = model.config.vision;
      if (imageOptions.patchSize !== vision.patchSize || imageOptions.mergeSize !== vision.spatialMergeSize || imageOptions.temporalPatchSize !== vision.temporalPatchSize) {
        throw new VagenError(
          `${ppPath}: patch_size ${imageOptions.patchSize}, merge_size ${imageOptions.mergeSize}, temporal_patch_size ${imageOptions.temporalPatchSize} disagree with config.json's vision_config (${vision.patchSize}, ${vision.spatialMergeSize}, ${vision.temporalPatchSize})`,
        );
      }
      return new Glm4vChatModel(model, tokenizer, template, imageOptions, {
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
    const { messages: converted, images } = toTemplateMessages(messages);
    const encoded = this.processor.encodeChat(converted, images, { addGenerationPrompt: true, pixels: false });
    const tokenIds = encoded.inputIds;
    const imageId = this.model.config.imageTokenId;
    let cursor = 0;
    const promptImages = images.map((image, i): PromptImage => {
      const grid = encoded.gridThw[i]!;
      const length = mergedTokenCount(grid, this.imageOptions.mergeSize);
      const offset = tokenIds.indexOf(imageId, cursor);
      cursor = offset + length;
      return { image, offset, length, key: imageKey(image), grid };
    });
    return { tokenIds, images: promptImages };
  }

  decode(ids: readonly number[]): string {
    return this.tokenizer.decode(ids, { skipSpecialTokens: true });
  }

  conversationCodec(): ConversationCodec {
    return new Glm4vConversationCodec(this.processor);
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

  /**
   * Embeddings of tokens [from, end); an image overlapping them goes through the vision
   * tower here. Pixels are processed only for the images that reach the range, so those a
   * session's cached prefix holds cost nothing.
   */
  embedPrompt(prompt: Prompt, from: number): Tensor {
    const { device, hiddenSize } = this.spec;
    const ids = prompt.tokenIds.slice(from);
    const n = ids.length;
    const embeds = this.model.text.embed(torch.tensor(Float64Array.from(ids), [n], { dtype: "i64", device }));
    for (const image of prompt.images) {
      const lo = Math.max(image.offset, from);
      const hi = image.offset + image.length;
      if (hi <= lo) continue;
      torch.tidy(() => {
        const processed = processGlm4vImages([image.image], this.imageOptions);
        const pixels = torch.tensor(processed.pixelValues, [processed.numPatches, processed.patchDim], { device });
        const features = this.model.encodeImages(pixels, [gridOf(image)]);
        this.imagesEncoded++;
        embeds.narrow(0, lo - from, hi - lo).copy_(features.narrow(0, lo - image.offset, hi - lo).to(embeds.dtype));
      });
    }
    return embeds.view(n, hiddenSize);
  }

  embedTokens(ids: Tensor): Tensor {
    return this.model.text.embed(ids);
  }

  forward(inputsEmbeds: Tensor, positions: Tensor, attention: AttentionBackend): Tensor {
    return this.model.text.forward({ inputsEmbeds, positionIds: positions, attention });
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
    const processed = images.length > 0 ? processGlm4vImagesCached(images, this.imageOptions) : undefined;
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
    return isGlm4vVisionWeight(name);
  }

  dispose(): void {
    this.model.dispose();
  }
}

function specOf(model: Glm4vModel): ModelSpec {
  const c = model.config.text;
  let weightBytes = 0;
  // What a decode step reads: the language model (the vision tower only runs in prefill).
  for (const [name, t] of model.weights) if (!isGlm4vVisionWeight(name)) weightBytes += t.nbytes();
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
    throw new VagenError(`a GLM-4V prompt image at token ${image.offset} has no (t, h, w) patch grid (got ${JSON.stringify(grid)})`);
  }
  return [grid[0]!, grid[1]!, grid[2]!];
}
