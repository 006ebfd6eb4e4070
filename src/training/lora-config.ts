/**
 * The LoRA keys of `vagen train`'s `actor` section and `vagen sft`'s `train` section,
 * verl's names and defaults (lora_rank 0 = off, lora_alpha 16, target_modules all-linear):
 *
 *   actor: {lora_rank: 8, lora_alpha: 16, target_modules: [q_proj, v_proj]}
 *
 * One schema for both commands, so a warm start and the RL run after it read alike. The
 * keys stay optional in the parsed config (configs built in code need not name them);
 * `loraSettingsOf` applies the defaults.
 */
import * as v from "valibot";
import { LORA_MODULES, loraTargets, type LoraModule, type LoraSettings } from "../models/index.ts";

export const loraEntries = {
  /** The adapters' inner width r; 0 trains every weight (no LoRA). */
  lora_rank: v.optional(v.pipe(v.number(), v.integer("lora_rank: an integer"), v.minValue(0, "lora_rank >= 0"))),
  /** The adapter path is scaled by lora_alpha / lora_rank. */
  lora_alpha: v.optional(v.pipe(v.number(), v.check((x) => Number.isFinite(x) && x > 0, "a finite number > 0"))),
  /** The decoder's linear layers that get adapters: a list of their names, or all-linear (all seven). */
  target_modules: v.optional(
    v.pipe(
      v.unknown(),
      v.check(
        (x) => x === "all-linear" || (Array.isArray(x) && x.length > 0 && x.every((m) => (LORA_MODULES as readonly unknown[]).includes(m))),
        `all-linear or a non-empty list of ${LORA_MODULES.join(", ")}`,
      ),
      v.transform((x) => x as "all-linear" | LoraModule[]),
    ),
  ),
};

export interface LoraKeys {
  lora_rank?: number;
  lora_alpha?: number;
  target_modules?: "all-linear" | readonly LoraModule[];
}

/** verl's defaults. */
export const LORA_DEFAULTS = { lora_rank: 0, lora_alpha: 16, target_modules: "all-linear" } as const;

/** The adapter's settings, or undefined when lora_rank is 0 (or unset). */
export function loraSettingsOf(keys: LoraKeys, seed: number): LoraSettings | undefined {
  const rank = keys.lora_rank ?? LORA_DEFAULTS.lora_rank;
  if (rank === 0) return undefined;
  return { rank, alpha: keys.lora_alpha ?? LORA_DEFAULTS.lora_alpha, targets: loraTargets(keys.target_modules ?? LORA_DEFAULTS.target_modules), seed };
}
