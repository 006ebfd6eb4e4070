/**
 * InternVL's processor (transformers' InternVLProcessor): the chat template renders each
 * image as one `<IMG_CONTEXT>` marker; each marker becomes `<img>`, then `<IMG_CONTEXT>`
 * repeated tokensPerTile times per tile of the image (tiling.ts: its canvas and, past one
 * tile, a thumbnail), then `</img>`; the text between is tokenized as it stands (the three
 * tokens are added tokens, so tokenizing around them gives the ids the whole string does).
 * The token strings are the tokenizer's `context_image_token`, `start_image_token` and
 * `end_image_token` (tokenizer_config.json, at its top level or in `extra_special_tokens`),
 * as InternVLProcessor reads them.
 *
 * The conversation codec (token-level conversations) encodes through the same expansion.
 */
import type { RGBImage } from "../../core/image.ts";
import { VagenError } from "../../core/errors.ts";
import { ChatFraming } from "../chat-framing.ts";
import { countImages, type ChatTemplate, type TemplateMessage } from "../chat-template.ts";
import type { ConversationCodec, EncodedText } from "../conversation.ts";
import type { TextTokenizer } from "../tokenizer.ts";
import type { TilingOptions } from "./config.ts";
import { tileCount, tileGrid } from "./tiling.ts";

/** Where one image's `<IMG_CONTEXT>` tokens sit, and the canvas that fixed their count. */
export interface ImageSpan {
  offset: number;
  length: number;
  /** [columns, rows] of the tile canvas. */
  grid: [number, number];
}

export interface EncodedInternVLText extends EncodedText {
  images: ImageSpan[];
}

/** The three image tokens as strings, from the tokenizer's config (InternVL's defaults without it). */
export interface ImageTokens {
  context: string;
  start: string;
  end: string;
}

export function imageTokensOf(tokenizer: TextTokenizer): ImageTokens {
  // transformers 5 writes the named tokens at the top level; 4.x kept them in an
  // `extra_special_tokens` object, as the published checkpoints have them.
  const extra = tokenizer.files.config.extra_special_tokens;
  const named = (key: string): string | undefined => {
    const value = extra && typeof extra === "object" && !Array.isArray(extra) ? (extra as Record<string, unknown>)[key] : undefined;
    return tokenizer.configToken(key) ?? (typeof value === "string" ? value : undefined);
  };
  return {
    context: named("context_image_token") ?? "<IMG_CONTEXT>",
    start: named("start_image_token") ?? "<img>",
    end: named("end_image_token") ?? "</img>",
  };
}

export class InternVLProcessor {
  readonly tokens: ImageTokens;
  private readonly startId: number;
  private readonly endId: number;

  constructor(
    readonly tokenizer: TextTokenizer,
    readonly template: ChatTemplate,
    readonly tiling: TilingOptions,
    readonly imageTokenId: number,
    readonly tokensPerTile: number,
    /** Extra chat template variables (LoadModelOptions.chatTemplateVariables). */
    readonly templateVariables?: Readonly<Record<string, unknown>>,
  ) {
    this.tokens = imageTokensOf(tokenizer);
    const contextId = tokenizer.tokenId(this.tokens.context);
    if (contextId !== imageTokenId) {
      throw new VagenError(
        `config.json: key "image_token_id": got ${imageTokenId}, but the tokenizer's ${this.tokens.context} is ${contextId}`,
        "the image token id and the tokenizer must come from the same model directory",
      );
    }
    this.startId = tokenizer.tokenId(this.tokens.start);
    this.endId = tokenizer.tokenId(this.tokens.end);
  }

  /** Placeholder tokens of an image of this canvas. */
  placeholderCount(grid: readonly number[]): number {
    return this.tokensPerTile * tileCount(grid);
  }

  /** Render messages with the chat template and encode them with their images. */
  encodeChat(messages: readonly TemplateMessage[], images: readonly RGBImage[], opts: { addGenerationPrompt?: boolean } = {}): EncodedInternVLText {
    const marked = countImages(messages);
    if (marked !== images.length) throw new VagenError(`the messages mark ${marked} image(s) but ${images.length} image(s) were given`);
    const variables = this.templateVariables && { ...this.templateVariables };
    return this.encodeText(this.template.render(messages, { addGenerationPrompt: opts.addGenerationPrompt ?? true, variables }), images);
  }

  /** Encode text whose images appear as single `<IMG_CONTEXT>` markers, markers expanded. */
  encodeText(text: string, images: readonly RGBImage[]): EncodedInternVLText {
    const parts = text.split(this.tokens.context);
    if (parts.length - 1 !== images.length) {
      throw new VagenError(`the prompt has ${parts.length - 1} ${this.tokens.context} marker(s) but ${images.length} image(s) were given`);
    }
    const tokenIds: number[] = [];
    const spans: ImageSpan[] = [];
    parts.forEach((part, i) => {
      if (part) tokenIds.push(...this.tokenizer.encode(part));
      const image = images[i];
      if (!image) return;
      const grid = tileGrid(image.width, image.height, this.tiling);
      const length = this.placeholderCount(grid);
      tokenIds.push(this.startId);
      spans.push({ offset: tokenIds.length, length, grid });
      for (let k = 0; k < length; k++) tokenIds.push(this.imageTokenId);
      tokenIds.push(this.endId);
    });
    return { tokenIds, images: spans };
  }
}

/** InternVL behind the conversation's codec seam: the processor's expansion and the template's framing. */
export class InternVLConversationCodec implements ConversationCodec {
  readonly framing: ChatFraming;

  constructor(readonly processor: InternVLProcessor) {
    const variables = processor.templateVariables && { ...processor.templateVariables };
    this.framing = new ChatFraming(processor.template, { variables });
  }

  encodeText(text: string, images: readonly RGBImage[]): EncodedText {
    return this.processor.encodeText(text, images);
  }

  decode(ids: readonly number[]): string {
    // An empty generation (an abort) is empty text; the tokenizers library refuses [] outright.
    if (ids.length === 0) return "";
    return this.processor.tokenizer.decode(ids, { skipSpecialTokens: true });
  }
}
