/**
 * InternVL (InternVL3.5, transformers' Hugging Face format) as a `ModelFamily` (family.ts):
 * the tokenizer, chat template and tiling image processor of a model directory, and the
 * model's pieces behind the seam the engine, the trainer and the CLI use.
 *
 *   prompts     buildPrompt (chat messages -> ids with each image's <img>, its
 *               <IMG_CONTEXT> run and </img>; pixels left for later), conversationCodec
 *   engine      promptPositions (0..n-1, one rotary axis), embedPrompt (each image's tiles
 *               through the vision tower once), embedTokens, forward over an
 *               AttentionBackend, logits
 *   training    forwardForTraining (a padded batch, causal attention, differentiable)
 *
 * An image's `PromptImage.grid` is its [columns, rows] tile canvas, which fixes its
 * placeholder count (tokensPerTile per tile, plus a thumbnail's past one tile).
 */
import { basename, resolve } from "node:path";
import type { ChatMessage } from "../../core/chat.ts";
import type { RGBImage } from "../../core/image.ts";
import { VagenError } from "../../core/errors.ts";
import * as torch from "../../torch/index.ts";
import type { DType, Device, Tensor } from "../../torch/index.ts";
import type { AttentionBackend } from "../attention.ts";
import { ChatTemplate, toTemplateMessages } from "../chat-template.ts";
import type { ConversationCodec } from "../conversation.ts";
import { chatEosTokenIds, generationEosTokenIds } from "../eos.ts";
import type { LoadModelOptions, ModelFamily, ModelSpec, TrainingBatch, TrainingForwardOptions } from "../family.ts";
import { imageKey } from "../image-key.ts";
import type { Prompt, PromptImage } from "../prompt.ts";
import { TextTokenizer } from "../tokenizer.ts";
import { loadTilingOptions, type TilingOptions } from "./config.ts";
import { InternVLModel } from "./model.ts";
import { InternVLConversationCodec, InternVLProcessor } from "./processor.ts";
import { tileGrid, tileImages, tileImagesCached, type TiledImages } from "./tiling.ts";
import { isInternVLVisionWeight } from "./weights.ts";

export const INTERNVL_FAMILY = "internvl";

export interface InternVLChatModelOptions {
  /** generation_config.json's end-of-sequence ids, added to the model's own. */
  generationEosTokenIds?: readonly number[];
  /** The name clients use for the model; default "internvl". */
  modelName?: string;
  /** Extra chat template variables. */
  templateVariables?: Readonly<Record<string, unknown>>;
}

export class InternVLChatModel implements ModelFamily {
  readonly family = INTERNVL_FAMILY;
  readonly modelName: string;
  readonly processor: InternVLProcessor;
  readonly eosTokenIds: readonly number[];
  readonly spec: ModelSpec;
  readonly tokenBytes: ((id: number) => Uint8Array) | undefined;
  readonly visionTokenIds: readonly number[];
  /** Images that went through the vision tower for the engine (for stats and tests). */
  imagesEncoded = 0;

  constructor(
    readonly model: InternVLModel,
    readonly tokenizer: TextTokenizer,
    template: ChatTemplate,
    readonly tiling: TilingOptions,
    opts: InternVLChatModelOptions = {},
  ) {
    this.modelName = opts.modelName ?? this.family;
    this.processor = new InternVLProcessor(tokenizer, template, tiling, model.config.imageTokenId, model.config.tokensPerTile, opts.templateVariables);
    this.eosTokenIds = chatEosTokenIds(tokenizer, model.config.eosTokenIds, opts.generationEosTokenIds ?? []);
    this.tokenBytes = tokenizer.tokenBytes();
    this.spec = specOf(model);
    const { start, end } = this.processor.tokens;
    const markers = [start, end, tokenizer.configToken("video_token") ?? "<video>"].flatMap((t) => tokenizer.maybeTokenId(t) ?? []);
    this.visionTokenIds = [model.config.imageTokenId, ...markers];
  }

  static load(dir: string, opts: LoadModelOptions): InternVLChatModel {
    const model = InternVLModel.load(dir, opts);
    try {
      return new InternVLChatModel(model, TextTokenizer.fromDir(dir), ChatTemplate.fromDir(dir), loadTilingOptions(dir, model.config), {
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
    const encoded = this.processor.encodeChat(converted, images, { addGenerationPrompt: true });
    const promptImages = encoded.images.map((span, i): PromptImage => ({ image: images[i]!, offset: span.offset, length: span.length, key: imageKey(images[i]!), grid: span.grid }));
    return { tokenIds: encoded.tokenIds, images: promptImages };
  }

  decode(ids: readonly number[]): string {
    return this.tokenizer.decode(ids, { skipSpecialTokens: true });
  }

  conversationCodec(): ConversationCodec {
    return new InternVLConversationCodec(this.processor);
  }

  // ---- what the engine runs --------------------------------------------------------------

  promptPositions(prompt: Prompt): number[][] {
    return [prompt.tokenIds.map((_, i) => i)];
  }

  /**
   * Embeddings of tokens [from, end), image features at the <IMG_CONTEXT> tokens of every
   * image that reaches the range. Pixels are tiled only here, for those images, so the
   * ones a session's cached prefix holds cost nothing.
   */
  embedPrompt(prompt: Prompt, from: number): Tensor {
    const ids = prompt.tokenIds.slice(from);
    const n = ids.length;
    const embeds = this.model.text.embed(torch.tensor(Float64Array.from(ids), [n], { dtype: "i64", device: this.device }));
    for (const image of prompt.images) {
      const lo = Math.max(image.offset, from);
      const hi = image.offset + image.length;
      if (hi <= lo) continue;
      torch.tidy(() => {
        const features = this.model.encodeTiles(this.tilesTensor(tileImages([image.image], this.tiling)));
        this.imagesEncoded++;
        if (features.shape[0] !== image.length) {
          throw new VagenError(`a prompt image at token ${image.offset} has ${image.length} placeholder(s), its tiles give ${features.shape[0]} feature(s)`);
        }
        embeds.narrow(0, lo - from, hi - lo).copy_(features.narrow(0, lo - image.offset, hi - lo).to(embeds.dtype));
      });
    }
    return embeds;
  }

  embedTokens(ids: Tensor): Tensor {
    return this.model.text.embed(ids);
  }

  forward(inputsEmbeds: Tensor, positions: Tensor, attention: AttentionBackend): Tensor {
    return this.model.forward({ inputsEmbeds, positionIds: positions, attention });
  }

  logits(hidden: Tensor): Tensor {
    return this.model.logits(hidden);
  }

  // ---- training --------------------------------------------------------------------------

  forwardForTraining(batch: TrainingBatch, opts: TrainingForwardOptions = {}): Tensor {
    if (batch.images.length !== batch.inputIds.length) {
      throw new VagenError(`training batch: ${batch.inputIds.length} rows of ids but ${batch.images.length} rows of images`);
    }
    this.checkRowImages(batch);
    const images = batch.images.flat();
    // A training step forwards the same images several times: their tiles are made once.
    const tiled = images.length > 0 ? tileImagesCached(images, this.tiling) : undefined;
    return torch.tidy(() =>
      this.model.forwardBatch(
        { inputIds: batch.inputIds, attentionMask: batch.attentionMask, pixelValues: tiled && this.tilesTensor(tiled) },
        { mathAttention: opts.mathAttention },
      ),
    );
  }

  /** (tiles, 3, S, S) on the model's device. */
  private tilesTensor(tiled: TiledImages): Tensor {
    const s = this.tiling.tileSize;
    return torch.tensor(tiled.pixelValues, [tiled.numTiles, 3, s, s], { device: this.device });
  }

  /** Each row's image tokens must be its own images' (features land in batch order). */
  private checkRowImages(batch: TrainingBatch): void {
    const imageId = this.model.config.imageTokenId;
    batch.inputIds.forEach((ids, b) => {
      const tokens = ids.reduce((n, id) => n + (id === imageId ? 1 : 0), 0);
      const expected = batch.images[b]!.reduce((n, image: RGBImage) => n + this.processor.placeholderCount(this.gridOf(image)), 0);
      if (tokens !== expected) {
        throw new VagenError(`training batch row ${b}: ${tokens} image token(s), but its ${batch.images[b]!.length} image(s) make ${expected}`);
      }
    });
  }

  private gridOf(image: RGBImage): [number, number] {
    return tileGrid(image.width, image.height, this.tiling);
  }

  isVisionWeight(name: string): boolean {
    return isInternVLVisionWeight(name);
  }

  dispose(): void {
    this.model.dispose();
  }
}

function specOf(model: InternVLModel): ModelSpec {
  const c = model.config.text;
  let weightBytes = 0;
  // What a decode step reads: the language model (the vision tower only runs in prefill).
  for (const [name, t] of model.weights) if (!isInternVLVisionWeight(name)) weightBytes += t.nbytes();
  return {
    numLayers: c.numLayers,
    numHeads: c.numHeads,
    numKvHeads: c.numKvHeads,
    headDim: c.headDim,
    hiddenSize: c.hiddenSize,
    vocabSize: c.vocabSize,
    positionAxes: 1,
    dtype: model.dtype,
    device: model.device,
    maxPositions: model.config.maxPositions,
    weightBytes,
  };
}
