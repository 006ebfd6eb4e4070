/**
 * The ids that end an assistant turn, gathered the way a Qwen-style chat model needs
 * them: config.json's eos_token_id, generation_config.json's (transformers' generate
 * stops on both), the chat format's `<|im_end|>` and tokenizer_config.json's eos_token.
 * Missing a stop id would let generation run past the turn into the next header.
 */
import { existsSync } from "node:fs";
import { join } from "node:path";
import { readJson, type TextTokenizer } from "./tokenizer.ts";

/** generation_config.json's eos_token_id (one id or a list), [] when absent. */
export function generationEosTokenIds(dir: string): number[] {
  const path = join(dir, "generation_config.json");
  if (!existsSync(path)) return [];
  const eos = readJson(path).eos_token_id;
  if (typeof eos === "number") return [eos];
  return Array.isArray(eos) ? eos.filter((id): id is number => typeof id === "number") : [];
}

/** Every stop id, without repeats, config ids first. */
export function chatEosTokenIds(tokenizer: TextTokenizer, ...lists: readonly (readonly number[])[]): number[] {
  const eos = new Set<number>(lists.flat());
  const imEnd = tokenizer.maybeTokenId("<|im_end|>");
  if (imEnd !== undefined) eos.add(imEnd);
  const cfgEos = tokenizer.configToken("eos_token");
  if (cfgEos) eos.add(tokenizer.tokenId(cfgEos));
  return [...eos];
}
