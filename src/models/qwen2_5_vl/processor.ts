/**
 * Qwen2.5-VL's processor: chat template -> text with one `<|image_pad|>` per image ->
 * each pad expanded to the image's merged-token count -> token ids, plus the image
 * processor's pixel values and grids. Mirrors transformers' Qwen2_5_VLProcessor, and
 * checks that image markers, images and image tokens agree before anything runs.
 */
import type { RGBImage } from "../../core/image.ts";
import { VagenError } from "../../core/errors.ts";
import type { ChatMessage as CoreChatMessage } from "../../core/chat.ts";
import { countImages, toTemplateMessages, type ChatTemplate, type TemplateMessage as ChatMessage } from "../chat-template.ts";
import { imageKey } from "../image-key.ts";
import type { Prompt, PromptImage } from "../prompt.ts";
import { imageGrid, mergedTokenCount, processImages, type ImageProcessorOptions, type ProcessedImages } from "../image-processor.ts";
import type { TextTokenizer } from "../tokenizer.ts";

export const IMAGE_PAD = "<|image_pad|>";

export interface EncodedPrompt {
  /** Token ids with image pads expanded. */
  inputIds: number[];
  /** The rendered chat text (before expansion). */
  text: string;
  /** Images of this prompt, processed (undefined when there are none, or with `pixels: false`). */
  images?: ProcessedImages;
  /** Each image's (t, h, w) patch grid, in order. */
  gridThw: [number, number, number][];
}

export interface EncodeOptions {
  addGenerationPrompt?: boolean;
  /**
   * Process the images' pixels too (default). false: only their grids, which fix the
   * token ids; whoever runs the vision tower processes pixels of the images it encodes
   * (a serving engine skips the ones a cached prefix already holds).
   */
  pixels?: boolean;
}

export class Qwen25VLProcessor {
  constructor(
    readonly tokenizer: TextTokenizer,
    readonly template: ChatTemplate,
    readonly imageOptions: ImageProcessorOptions,
    readonly imageTokenId: number,
    /** Extra chat template variables (LoadModelOptions.chatTemplateVariables: add_vision_id, ...). */
    readonly templateVariables?: Readonly<Record<string, unknown>>,
  ) {}

  /** Render messages with the chat template and encode them with their images. */
  encodeChat(messages: readonly ChatMessage[], images: readonly RGBImage[], opts: EncodeOptions = {}): EncodedPrompt {
    const marked = countImages(messages);
    if (marked !== images.length) {
      throw new VagenError(`the messages mark ${marked} image(s) but ${images.length} image(s) were given`);
    }
    const variables = this.templateVariables && { ...this.templateVariables };
    const text = this.template.render(messages, { addGenerationPrompt: opts.addGenerationPrompt ?? true, variables });
    return this.encodeText(text, images, opts);
  }

  /**
   * Chat messages -> the engine's `Prompt`: ids ending with the assistant header, each
   * image's span of image-pad tokens and its grid; pixels are left for whoever runs the
   * vision tower (the families that share this processor: Qwen2.5-VL, Qwen3-VL).
   */
  buildPrompt(messages: readonly CoreChatMessage[]): Prompt {
    const { messages: converted, images } = toTemplateMessages(messages);
    const encoded = this.encodeChat(converted, images, { addGenerationPrompt: true, pixels: false });
    const tokenIds = encoded.inputIds;
    let cursor = 0;
    const promptImages = images.map((image, i): PromptImage => {
      const grid = encoded.gridThw[i]!;
      const length = mergedTokenCount(grid, this.imageOptions.mergeSize);
      const offset = tokenIds.indexOf(this.imageTokenId, cursor);
      cursor = offset + length;
      return { image, offset, length, key: imageKey(image), grid };
    });
    return { tokenIds, images: promptImages };
  }

  /** Encode text whose images appear as single `<|image_pad|>` markers. */
  encodeText(text: string, images: readonly RGBImage[], opts: EncodeOptions = {}): EncodedPrompt {
    const parts = text.split(IMAGE_PAD);
    if (parts.length - 1 !== images.length) {
      throw new VagenError(`the prompt has ${parts.length - 1} ${IMAGE_PAD} marker(s) but ${images.length} image(s) were given`);
    }
    const processed = images.length && opts.pixels !== false ? processImages(images, this.imageOptions) : undefined;
    const gridThw = processed?.gridThw ?? images.map((img) => imageGrid(img, this.imageOptions));
    const inputIds: number[] = [];
    parts.forEach((part, i) => {
      if (part) inputIds.push(...this.tokenizer.encode(part));
      if (i < parts.length - 1) {
        const n = mergedTokenCount(gridThw[i]!, this.imageOptions.mergeSize);
        for (let k = 0; k < n; k++) inputIds.push(this.imageTokenId);
      }
    });
    return { inputIds, text, images: processed, gridThw };
  }
}

/** Check that the image tokens of `inputIds` match the images' merged-token counts. */
export function checkImageTokens(inputIds: readonly (readonly number[])[], gridThw: readonly (readonly number[])[], imageTokenId: number, mergeSize: number): void {
  let tokens = 0;
  for (const row of inputIds) for (const id of row) if (id === imageTokenId) tokens++;
  const features = gridThw.reduce((s, g) => s + mergedTokenCount(g, mergeSize), 0);
  if (tokens > 0 && gridThw.length === 0) {
    throw new VagenError(
      `the token ids hold ${tokens} image token(s) but no images were given: a VLM forward without its images is refused`,
      "pass the images (pixel values and grids) that the prompt's image tokens stand for",
    );
  }
  if (tokens !== features) {
    throw new VagenError(
      `image features and image tokens do not match: the token ids hold ${tokens} image token(s), the ${gridThw.length} image(s) give ${features} feature(s)`,
      "each image needs exactly (t*h*w)/merge^2 image-pad tokens, in image order",
    );
  }
}
