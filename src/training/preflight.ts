/**
 * Checks before the first rollout, for mistakes that do not crash but silently ruin a
 * run.
 *
 * Response-format tags against the tokenizer: the model's reply is decoded with special
 * tokens skipped, so a format tag the tokenizer holds as a special token (`<think>` on
 * Qwen3-VL-style tokenizers) vanishes from the text the env parses, and every `wm` or
 * `free_think` turn scores as malformed. Each tag of each env's system prompt must
 * survive encode -> decode.
 *
 * The env is asked as the agent loop asks it (envs/_common/types.ts): `reset(seed)` first,
 * then `systemPrompt()`. A remote env has no session, so no system prompt, before its
 * first reset. An env that cannot answer (a remote server that is down) fails the check
 * with an error naming the env's config key, rather than later in the first rollout.
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

/** One env to check: where its config lives (for messages), how to make one, and the seed to reset it with. */
export interface PreflightEnv {
  /** Names the env in messages: the config file and key (`train.yaml: key "data.train.sokoban"`). */
  key: string;
  create: () => Promise<Env>;
  /** The seed of the reset before the system prompt is asked for (default 0). */
  seed?: number;
}

/** The env's system prompt, asked for as the agent loop does; failures name the env. */
async function systemPromptOf(env: Env, key: string, seed: number): Promise<string> {
  try {
    await env.reset(seed);
    return (await env.systemPrompt()).text;
  } catch (err) {
    throw new VagenError(
      `${key}: the env did not answer the format check (reset with seed ${seed}, then the system prompt): ${(err as Error).message}`,
      err instanceof VagenError && err.hint ? err.hint : "check that the env can start (for a remote env: that its server is up and reachable at base_urls)",
    );
  }
}

/** Throws naming the env, the tags and the fix when a format tag would vanish from replies. */
export async function checkResponseFormats(envs: readonly PreflightEnv[], codec: ReplyCodec): Promise<void> {
  for (const { key, create, seed = 0 } of envs) {
    const env = await create();
    try {
      const prompt = await systemPromptOf(env, key, seed);
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
