/**
 * Qwen2.5-VL as a `ModelFamily` (family.ts): the tokenizer, chat template and image
 * processor of a model directory, and the model's pieces behind the seam the engine,
 * the trainer and the CLI use.
 *
 *   prompts     buildPrompt (chat messages -> ids and image spans, pixels left for later),
 *               conversationCodec (token-level conversations)
 *   engine      promptPositions (M-RoPE), embedPrompt (images through the vision tower
 *               once each), embedTokens, forward over an AttentionBackend, logits
 *   training    forwardForTraining (a padded batch, causal attention, differentiable)
 *
 * `model` (Qwen25VLModel) keeps the separate differentiable pieces for tests and tools.
 */
import { existsSync } from "node:fs";
import { basename, join, resolve } from "node:path";
import type { ChatMessage } from "../../core/chat.ts";
import type { RGBImage } from "../../core/image.ts";
import { VagenError } from "../../core/errors.ts";
import * as torch from "../../torch/index.ts";
import type { DType, Device, Tensor } from "../../torch/index.ts";
import { validate } from "../../config/index.ts";
import type { AttentionBackend } from "../attention.ts";
import { ChatTemplate } from "../chat-template.ts";
import type { ConversationCodec } from "../conversation.ts";
import type { LoadModelOptions, ModelFamily, ModelSpec, TrainingBatch, TrainingForwardOptions } from "../family.ts";
import { chatEosTokenIds, generationEosTokenIds } from "../eos.ts";
import {
  DEFAULT_IMAGE_PROCESSOR,
  imageProcessorOptions,
  checkRowImageTokens,
  imageGrid,
  PreprocessorConfigSchema,
  type ImageProcessorOptions,
} from "../image-processor.ts";
import { resizeImagesCached } from "../patch-cache.ts";
import { patchesOnDevice, type DevicePatches } from "../device-patches.ts";
import type { Prompt, PromptImage } from "../prompt.ts";
import { readJson, TextTokenizer } from "../tokenizer.ts";
import { Qwen25VLModel } from "./model.ts";
import { Qwen25VLConversationCodec } from "./conversation-codec.ts";
import { Qwen25VLProcessor } from "./processor.ts";
import { computeRopeIndex } from "./rope-index.ts";

/** Qwen2.5-VL's published max_position_embeddings. */
const MAX_POSITIONS = 128000;

export interface Qwen25VLChatModelOptions {
  /** generation_config.json's end-of-sequence ids, added to the model's own. */
  generationEosTokenIds?: readonly number[];
  /** The name clients use for the model; default "qwen2_5_vl". */
  modelName?: string;
  /** Extra chat template variables (add_vision_id, ...). */
  templateVariables?: Readonly<Record<string, unknown>>;
}

export class Qwen25VLChatModel implements ModelFamily {
  readonly family = "qwen2_5_vl";
  readonly modelName: string;
  readonly processor: Qwen25VLProcessor;
  readonly eosTokenIds: readonly number[];
  readonly padTokenId: number;
  readonly spec: ModelSpec;
  readonly tokenBytes: ((id: number) => Uint8Array) | undefined;
  readonly visionTokenIds: readonly number[];
  /** Images that went through the vision tower in `embedPrompt` (for stats and tests). */
  imagesEncoded = 0;

  constructor(
    readonly model: Qwen25VLModel,
    readonly tokenizer: TextTokenizer,
    template: ChatTemplate,
    readonly imageOptions: ImageProcessorOptions,
    opts: Qwen25VLChatModelOptions = {},
  ) {
    this.modelName = opts.modelName ?? this.family;
    this.processor = new Qwen25VLProcessor(tokenizer, template, imageOptions, model.config.imageTokenId, opts.templateVariables);
    this.eosTokenIds = chatEosTokenIds(tokenizer, model.config.eosTokenIds, opts.generationEosTokenIds ?? []);
    const pad = tokenizer.configToken("pad_token");
    this.padTokenId = pad ? tokenizer.tokenId(pad) : (this.eosTokenIds[0] ?? 0);
    this.tokenBytes = tokenizer.tokenBytes();
    this.spec = specOf(model);
    const markers = ["<|vision_start|>", "<|vision_end|>", "<|video_pad|>"].flatMap((t) => tokenizer.maybeTokenId(t) ?? []);
    this.visionTokenIds = [model.config.imageTokenId, ...markers];
  }

  static load(dir: string, opts: LoadModelOptions): Qwen25VLChatModel {
    const model = Qwen25VLModel.load(dir, opts);
    try {
      const tokenizer = TextTokenizer.fromDir(dir);
      const template = ChatTemplate.fromDir(dir);
      const ppPath = join(dir, "preprocessor_config.json");
      const imageOptions = existsSync(ppPath)
        ? imageProcessorOptions(validate(PreprocessorConfigSchema, readJson(ppPath), { file: ppPath }))
        : DEFAULT_IMAGE_PROCESSOR;
      return new Qwen25VLChatModel(model, tokenizer, template, imageOptions, {
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

  /**
   * Pixels are processed only here, when the vision tower runs on an image, so images a
   * session's cached prefix already holds cost nothing on the host either.
   */
  embedPrompt(prompt: Prompt, from: number): Tensor {
    return this.embedPrompts([{ prompt, from }])[0]!;
  }

  /**
   * Every new image of these prompts goes through the vision tower in calls of up to
   * VISION_BATCH_PATCHES patches, not one call an image: a rollout step's prefill holds an
   * image per env, and per-image calls left the GPU idle between launches.
   */
  embedPrompts(items: readonly { prompt: Prompt; from: number }[]): Tensor[] {
    const { device, hiddenSize } = this.spec;
    const xs = items.map(({ prompt, from }) => {
      const ids = prompt.tokenIds.slice(from);
      return this.model.text.embed(torch.tensor(Float64Array.from(ids), [ids.length], { dtype: "i64", device }));
    });
    // The images whose placeholders overlap a prompt's new range, and where their rows go.
    const wanted = items.flatMap(({ prompt, from }, row) =>
      prompt.images.flatMap((image) => {
        const lo = Math.max(image.offset, from);
        const hi = image.offset + image.length;
        return hi <= lo ? [] : [{ row, image, lo: lo - from, skip: lo - image.offset, count: hi - lo }];
      }),
    );
    for (const batch of visionBatches(wanted, (w) => gridOf(w.image).reduce((a, b) => a * b))) {
      const { pixels } = this.devicePatches(batch.map((w) => w.image.image));
      const features = this.model.encodeImages(pixels, batch.map((w) => gridOf(w.image)));
      let offset = 0;
      for (const w of batch) {
        xs[w.row]!.narrow(0, w.lo, w.count).copy_(features.narrow(0, offset + w.skip, w.count).to(xs[w.row]!.dtype));
        offset += w.image.length;
        this.imagesEncoded++;
      }
    }
    return xs.map((x) => x.view(x.shape[0]!, hiddenSize));
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
    const grids = images.map((img) => imageGrid(img, this.imageOptions));
    checkRowImageTokens(batch, grids, this.model.config.imageTokenId, this.imageOptions.mergeSize);
    return torch.tidy(() => {
      const out = this.model.forwardBatch(
        {
          inputIds: batch.inputIds as number[][],
          attentionMask: batch.attentionMask as number[][] | undefined,
          pixelValues: images.length > 0 ? this.devicePatches(images).pixels : undefined,
          imageGridThw: grids,
        },
        { mathAttention: opts.mathAttention },
      );
      return out.hidden;
    });
  }


  /**
   * Patches of `images` on the model's device, from their bytes. On a GPU the resize runs
   * there too; on a CPU the host's resize is cheaper than dense products, and each image
   * is resized once (a training step forwards the same images several times, and a
   * rollout's renders repeat).
   */
  private devicePatches(images: readonly RGBImage[]): DevicePatches {
    if (this.device.startsWith("cuda")) return patchesOnDevice(images, this.imageOptions, this.device, { resize: "device" });
    return patchesOnDevice(resizeImagesCached(images, this.imageOptions), this.imageOptions, this.device);
  }

  isVisionWeight(name: string): boolean {
    return isQwen25VLVisionWeight(name);
  }

  dispose(): void {
    this.model.dispose();
  }
}

/** The vision tower and its patch merger: every `visual.*` weight (canonical names). */
function isQwen25VLVisionWeight(name: string): boolean {
  return name.startsWith("visual.");
}

function specOf(model: Qwen25VLModel): ModelSpec {
  const c = model.config.text;
  let weightBytes = 0;
  // What a decode step reads: the language model (the vision tower only runs in prefill).
  for (const [name, t] of model.weights) if (!isQwen25VLVisionWeight(name)) weightBytes += t.nbytes();
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
    maxPositions: MAX_POSITIONS,
    weightBytes,
  };
}

/** An image's (t, h, w) patch grid, which fixes its placeholder count and positions. */
function gridOf(image: PromptImage): [number, number, number] {
  const grid = image.grid;
  if (!grid || grid.length !== 3) {
    throw new VagenError(`a Qwen2.5-VL prompt image at token ${image.offset} has no (t, h, w) patch grid (got ${JSON.stringify(grid)})`);
  }
  return [grid[0]!, grid[1]!, grid[2]!];
}

/** Patches one vision call may take: a rollout's images batched, the activations bounded. */
const VISION_BATCH_PATCHES = 32768;

/** `items` in order, cut into runs of at most VISION_BATCH_PATCHES patches (an item larger than that alone). */
function visionBatches<T>(items: readonly T[], patches: (item: T) => number): T[][] {
  const batches: T[][] = [];
  let size = 0;
  for (const item of items) {
    const n = patches(item);
    if (batches.length === 0 || size + n > VISION_BATCH_PATCHES) {
      batches.push([]);
      size = 0;
    }
    batches.at(-1)!.push(item);
    size += n;
  }
  return batches;
}
