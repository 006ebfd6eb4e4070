/**
 * GLM-4V's processor (transformers' Glm4vProcessor / Glm46VProcessor): chat template ->
 * text with each image as `<|begin_of_image|><|image|><|end_of_image|>` -> each `<|image|>`
 * expanded to the image's merged-token count of image tokens -> token ids, plus the image
 * processor's pixel values and grids (GLM's resize rule, image-processor.ts). The encoded
 * shape is Qwen2.5-VL's processor's, so the conversation codec is shared.
 */
import type { RGBImage } from "../../core/image.ts";
import { VagenError } from "../../core/errors.ts";
import { countImages, type ChatTemplate, type TemplateMessage } from "../chat-template.ts";
import { mergedTokenCount, type ImageProcessorOptions } from "../image-processor.ts";
import type { TextTokenizer } from "../tokenizer.ts";
import type { EncodedPrompt, EncodeOptions } from "../qwen2_5_vl/processor.ts";
import { glm4vImageGrid, processGlm4vImages } from "./image-processor.ts";

/** The one token a rendered template writes per image, expanded to the image's token count. */
export const GLM4V_IMAGE_TOKEN = "<|image|>";

export class Glm4vProcessor {
  constructor(
    readonly tokenizer: TextTokenizer,
    readonly template: ChatTemplate,
    readonly imageOptions: ImageProcessorOptions,
    readonly imageTokenId: number,
    /** Extra chat template variables (LoadModelOptions.chatTemplateVariables). */
    readonly templateVariables?: Readonly<Record<string, unknown>>,
  ) {}

  /** Render messages with the chat template and encode them with their images. */
  encodeChat(messages: readonly TemplateMessage[], images: readonly RGBImage[], opts: EncodeOptions = {}): EncodedPrompt {
    const marked = countImages(messages);
    if (marked !== images.length) {
      throw new VagenError(`the messages mark ${marked} image(s) but ${images.length} image(s) were given`);
    }
    const variables = this.templateVariables && { ...this.templateVariables };
    const text = this.template.render(messages, { addGenerationPrompt: opts.addGenerationPrompt ?? true, variables });
    return this.encodeText(text, images, opts);
  }

  /** Encode text whose images appear as single `<|image|>` tokens. */
  encodeText(text: string, images: readonly RGBImage[], opts: EncodeOptions = {}): EncodedPrompt {
    const parts = text.split(GLM4V_IMAGE_TOKEN);
    if (parts.length - 1 !== images.length) {
      throw new VagenError(`the prompt has ${parts.length - 1} ${GLM4V_IMAGE_TOKEN} token(s) but ${images.length} image(s) were given`);
    }
    const processed = images.length && opts.pixels !== false ? processGlm4vImages(images, this.imageOptions) : undefined;
    const gridThw = processed?.gridThw ?? images.map((img) => glm4vImageGrid(img, this.imageOptions));
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
