/**
 * A content key for an image's pixels. Every image of a prompt uses the same placeholder
 * token id, so token ids alone cannot tell two images apart: whoever compares or caches
 * prompts (a KV cache's shared prefix, a conversation's image spans) compares these keys.
 */
import type { RGBImage } from "../core/image.ts";

/** A hash of the pixels and the size; equal images give equal keys. */
export function imageKey(image: RGBImage): string {
  const h = Bun.hash.wyhash(image.data, BigInt(image.width * 65536 + image.height));
  return `${image.width}x${image.height}:${h.toString(16)}`;
}
