/**
 * Qwen2.5-VL behind the engine's ModelAdapter and ChatPromptBuilder seams.
 *
 * Weights, the vision tower, embeddings, the decoder, the LM head, the processor and the
 * M-RoPE position rules all come from src/models. The engine owns attention by passing its
 * AttentionBackend (slot KV cache, per-row cached lengths, grouped-query folding) as the
 * decoder's attention hook, so there is one decoder implementation for training,
 * generation and serving.
 */
import * as torch from "../../torch/index.ts";
import type { Tensor } from "../../torch/index.ts";
import { VagenError } from "../../core/errors.ts";
import { toTemplateMessages } from "../../models/chat-template.ts";
import { mergedTokenCount, processImages } from "../../models/image-processor.ts";
import type { Qwen25VLChatModel } from "../../models/qwen2_5_vl/chat-model.ts";
import { computeRopeIndex } from "../../models/qwen2_5_vl/rope-index.ts";
import type { ChatMessage } from "../../core/chat.ts";
import type { AttentionBackend, ModelAdapter, ModelSpec } from "../adapter.ts";
import type { ChatPromptBuilder } from "../chat.ts";
import { imageKey } from "../prompt.ts";
import type { Prompt, PromptImage } from "../types.ts";

/**
 * An image's (t, h, w) patch grid, which fixes its placeholder count and positions. Pixels
 * are processed only when the vision tower runs on the image, so images a session's
 * cached prefix already holds cost nothing on the host either.
 */
function gridOf(image: PromptImage): [number, number, number] {
  const grid = image.grid;
  if (!grid || grid.length !== 3) {
    throw new VagenError(`a Qwen2.5-VL prompt image at token ${image.offset} has no (t, h, w) patch grid (got ${JSON.stringify(grid)})`);
  }
  return [grid[0]!, grid[1]!, grid[2]!];
}

/** Qwen2.5-VL's published max_position_embeddings. */
const MAX_POSITIONS = 128000;

export class Qwen25VLAdapter implements ModelAdapter, ChatPromptBuilder {
  readonly spec: ModelSpec;
  readonly eosTokenIds: number[];
  readonly tokenBytes: ((id: number) => Uint8Array) | undefined;
  /** Images that went through the vision tower (for stats and tests). */
  imagesEncoded = 0;

  constructor(
    readonly chat: Qwen25VLChatModel,
    readonly modelName: string,
  ) {
    const c = chat.model.config.text;
    let weightBytes = 0;
    // What a decode step reads: the language model (the vision tower only runs in prefill).
    for (const [name, t] of chat.model.weights) if (!name.startsWith("visual.")) weightBytes += t.nbytes();
    this.spec = {
      numLayers: c.numLayers,
      numHeads: c.numHeads,
      numKvHeads: c.numKvHeads,
      headDim: c.headDim,
      hiddenSize: c.hiddenSize,
      vocabSize: c.vocabSize,
      positionAxes: 3,
      dtype: chat.dtype,
      device: chat.device,
      maxPositions: MAX_POSITIONS,
      weightBytes,
    };
    this.eosTokenIds = [...chat.eosTokenIds];
    this.tokenBytes = chat.tokenizer.tokenBytes();
  }

  // ---- ChatPromptBuilder ----------------------------------------------------------------

  buildPrompt(messages: readonly ChatMessage[]): Prompt {
    const { messages: converted, images } = toTemplateMessages(messages);
    const encoded = this.chat.processor.encodeChat(converted, images, { addGenerationPrompt: true, pixels: false });
    const tokenIds = encoded.inputIds;
    const promptImages: PromptImage[] = [];
    const imageId = this.chat.model.config.imageTokenId;
    const merge = this.chat.imageOptions.mergeSize;
    let cursor = 0;
    images.forEach((image, i) => {
      const grid = encoded.gridThw[i]!;
      const count = mergedTokenCount(grid, merge);
      const offset = tokenIds.indexOf(imageId, cursor);
      promptImages.push({ image, offset, length: count, key: imageKey(image), grid });
      cursor = offset + count;
    });
    return { tokenIds, images: promptImages };
  }

  decode(ids: readonly number[]): string {
    return this.chat.tokenizer.decode(ids, { skipSpecialTokens: true });
  }

  // ---- ModelAdapter ------------------------------------------------------------------------

  promptPositions(prompt: Prompt): number[][] {
    const { positionIds } = computeRopeIndex({
      inputIds: [prompt.tokenIds],
      imageGridThw: prompt.images.map(gridOf),
      imageTokenId: this.chat.model.config.imageTokenId,
      spatialMergeSize: this.chat.model.config.vision.spatialMergeSize,
    });
    return positionIds.map((axis) => axis[0]!);
  }

  embedPrompt(prompt: Prompt, from: number): Tensor {
    const { device, hiddenSize } = this.spec;
    const ids = prompt.tokenIds.slice(from);
    const n = ids.length;
    const x = this.chat.model.text.embed(torch.tensor(Float64Array.from(ids), [n], { dtype: "i64", device }));
    for (const image of prompt.images) {
      const lo = Math.max(image.offset, from);
      const hi = image.offset + image.length;
      if (hi <= lo) continue;
      const processed = processImages([image.image], this.chat.imageOptions);
      const pixels = torch.tensor(processed.pixelValues, [processed.numPatches, processed.patchDim], { device });
      const features = this.chat.model.encodeImages(pixels, [gridOf(image)]);
      this.imagesEncoded++;
      x.narrow(0, lo - from, hi - lo).copy_(features.narrow(0, lo - image.offset, hi - lo).to(x.dtype));
    }
    return x.view(n, hiddenSize);
  }

  embedTokens(ids: Tensor): Tensor {
    return this.chat.model.text.embed(ids);
  }

  forward(inputsEmbeds: Tensor, positions: Tensor, attention: AttentionBackend): Tensor {
    return this.chat.model.text.forward({ inputsEmbeds, positionIds: positions, attention });
  }

  logits(hidden: Tensor): Tensor {
    return this.chat.model.logits(hidden);
  }
}
