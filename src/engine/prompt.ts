/**
 * Prompt helpers: how much of a new prompt a session's cached KV already covers, and
 * content keys for images.
 */
import type { Prompt, PromptImage } from "./types.ts";

/** Where an image sits in a cached token sequence, and which pixels it was. */
export interface ImageSpan {
  offset: number;
  length: number;
  key: string;
}

/**
 * Length of the longest prefix shared by the cached sequence and the prompt. Tokens must
 * be equal, and every image that starts inside the shared part must be the same image
 * at the same offset: all images use the same placeholder id, so ids alone would let a
 * new image silently reuse an old image's KV.
 */
export function sharedPrefixLength(
  cachedTokens: readonly number[],
  cachedImages: readonly ImageSpan[],
  prompt: Prompt,
): number {
  const limit = Math.min(cachedTokens.length, prompt.tokenIds.length);
  let shared = 0;
  while (shared < limit && cachedTokens[shared] === prompt.tokenIds[shared]) shared++;
  const cachedByOffset = new Map(cachedImages.map((s) => [s.offset, s]));
  for (const image of prompt.images) {
    if (image.offset >= shared) continue;
    const cached = cachedByOffset.get(image.offset);
    if (!cached || cached.key !== image.key || cached.length !== image.length) shared = Math.min(shared, image.offset);
  }
  const promptOffsets = new Set(prompt.images.map((i) => i.offset));
  for (const span of cachedImages) {
    if (span.offset < shared && !promptOffsets.has(span.offset)) shared = Math.min(shared, span.offset);
  }
  return shared;
}

/** A content hash of an image's pixels (and size), used to match cached images. */
export { imageKey } from "../models/image-key.ts";

/** The images of `prompt` whose placeholder tokens overlap [from, end). */
export function imagesFrom(prompt: Prompt, from: number): PromptImage[] {
  return prompt.images.filter((i) => i.offset + i.length > from);
}

/** Checks the prompt is internally consistent before it reaches the model. */
export function validatePrompt(prompt: Prompt, vocabSize: number): string | undefined {
  if (prompt.tokenIds.length === 0) return "the prompt has no tokens";
  for (const id of prompt.tokenIds) {
    if (!Number.isInteger(id) || id < 0 || id >= vocabSize) return `token id ${id} is outside the vocabulary [0, ${vocabSize})`;
  }
  let end = 0;
  for (const image of [...prompt.images].sort((a, b) => a.offset - b.offset)) {
    if (image.offset < end) return `image placeholders overlap at token ${image.offset}`;
    if (image.length <= 0 || image.offset + image.length > prompt.tokenIds.length) {
      return `an image's placeholder span [${image.offset}, ${image.offset + image.length}) lies outside the ${prompt.tokenIds.length} prompt tokens`;
    }
    end = image.offset + image.length;
  }
  return undefined;
}
