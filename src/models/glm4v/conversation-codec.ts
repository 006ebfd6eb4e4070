/**
 * GLM-4V behind the conversation's codec seam: the processor's tokenizer and its image
 * expansion (each `<|image|>` becomes the image's merged-token count of image ids), and the
 * chat template's framing.
 */
import type { RGBImage } from "../../core/image.ts";
import { ChatFraming } from "../chat-framing.ts";
import type { ConversationCodec, EncodedText } from "../conversation.ts";
import { mergedTokenCount } from "../image-processor.ts";
import type { Glm4vProcessor } from "./processor.ts";

export class Glm4vConversationCodec implements ConversationCodec {
  readonly framing: ChatFraming;

  constructor(readonly processor: Glm4vProcessor) {
    const variables = processor.templateVariables && { ...processor.templateVariables };
    this.framing = new ChatFraming(processor.template, { variables });
  }

  encodeText(text: string, images: readonly RGBImage[]): EncodedText {
    // Grids only: they fix the token ids; pixels are processed by whoever runs the vision tower.
    const encoded = this.processor.encodeText(text, images, { pixels: false });
    const { imageTokenId } = this.processor;
    const mergeSize = this.processor.imageOptions.mergeSize;
    const spans: EncodedText["images"] = [];
    let cursor = 0;
    for (const grid of encoded.gridThw) {
      // Image ids come only from `<|image|>` tokens (encodeText checked one per image), so
      // the next run of them after the previous image is this image's.
      const offset = encoded.inputIds.indexOf(imageTokenId, cursor);
      const length = mergedTokenCount(grid, mergeSize);
      spans.push({ offset, length, grid });
      cursor = offset + length;
    }
    return { tokenIds: encoded.inputIds, images: spans };
  }

  decode(ids: readonly number[]): string {
    // An empty generation (an abort) is empty text; the tokenizers library refuses [] outright.
    if (ids.length === 0) return "";
    return this.processor.tokenizer.decode(ids, { skipSpecialTokens: true });
  }
}
