/**
 * A tokenized prompt as every layer above the tokenizer sees it: token ids with image
 * placeholders already expanded, and where each image's placeholders sit. The family's
 * prompt builder makes one from chat messages; a token-level conversation
 * (conversation.ts) is one as it stands; the engine runs it.
 *
 * Plain data (no tensors): callers above the engine never touch the tensor library.
 */
import type { RGBImage } from "../core/image.ts";

/** One image of a prompt and where its placeholder tokens sit in the token ids. */
export interface PromptImage {
  image: RGBImage;
  /** Index of the first placeholder token of this image in `Prompt.tokenIds`. */
  offset: number;
  /** Number of placeholder tokens the image occupies. */
  length: number;
  /**
   * Content identity of the pixels. Two prompts share a cached prefix only where their
   * images are identical, since every image uses the same placeholder token id.
   */
  key: string;
  /**
   * The image's patch grid as the family's processor computed it (Qwen2.5-VL: [t, h, w]);
   * it fixes the placeholder count. Opaque to the engine, read by the family.
   * A token-level conversation's image spans (conversation.ts) carry it too, so a
   * conversation's prompt is a `Prompt` as it stands.
   */
  grid?: readonly number[];
  /** Family-specific preprocessing result, opaque to the engine. */
  extra?: unknown;
}

/** A fully tokenized prompt: token ids with image placeholders already expanded. */
export interface Prompt {
  tokenIds: number[];
  images: PromptImage[];
}
