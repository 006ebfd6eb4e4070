/**
 * Checks before the first rollout, for mistakes that do not crash but silently ruin a
 * run.
 *
 * Response-format tags against the tokenizer: the model's reply is decoded with special
 * tokens skipped, so a format tag the tokenizer holds as a special token (`<think>` on
 * Qwen3-VL-style tokenizers) vanishes from the text the env parses, and every `wm` or
 * `free_think` turn scores as malformed. Each tag of each env's system prompt must
 * survive encode -> decode.
 */
import { VagenError } from "../core/errors.ts";
import type { Env } from "../../envs/_common/types.ts";

/** What the check needs from a tokenizer: text -> ids -> text as replies are decoded. */
export interface ReplyCodec {
  encode(text: string): number[];
  /** Decodes as the engine decodes replies (special tokens skipped). */
  decode(ids: readonly number[]): string;
}

/** `<tag>` and `</tag>` markers in a prompt. */
export function formatTags(prompt: string): string[] {
  return [...new Set(prompt.match(/<\/?[A-Za-z_][\w-]*>/g) ?? [])];
}

/** The tags that do not survive a round trip through the tokenizer. */
export function lostTags(tags: readonly string[], codec: ReplyCodec): string[] {
  return tags.filter((tag) => !codec.decode(codec.encode(`x${tag}x`)).includes(tag));
}

/** Throws naming the env, the tags and the fix when a format tag would vanish from replies. */
export async function checkResponseFormats(envs: readonly { key: string; create: () => Promise<Env> }[], codec: ReplyCodec): Promise<void> {
  for (const { key, create } of envs) {
    const env = await create();
    try {
      const prompt = (await env.systemPrompt()).text;
      const lost = lostTags(formatTags(prompt), codec);
      if (lost.length) {
        throw new VagenError(
          `${key}: the response format uses ${lost.join(", ")}, which the model's tokenizer holds as special token(s): decoded replies lose them, so every turn would parse as malformed`,
          "pick a prompt_format whose tags are plain text for this model family (e.g. free_wm or no_think variants)",
        );
      }
    } finally {
      await env.close();
    }
  }
}
