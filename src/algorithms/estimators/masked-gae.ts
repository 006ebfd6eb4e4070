/**
 * `masked_gae`, the paper's VAGEN-Base estimator (legacy `compute_gae_advantage_return`
 * with a loss mask; spec §8.3): GAE over the model tokens only, each token's next value
 * being the value at the next model token and the last model token's being 0; returns
 * A + V at model tokens; whitened over the mask.
 *
 * That is exactly `token_level_gae`'s recursion, so this delegates to it; the legacy code
 * ran per row under concat, and stitching makes split layouts give the same numbers.
 *
 * Shapes: batch tensors [B, T]; outputs [B, T].
 */
import type { AdvantageBatch, AdvantageOutput } from "./types.ts";
import { tokenLevelGae } from "./token-level-gae.ts";

export interface MaskedGaeOptions {
  /** Discount per token (algorithm.gamma). */
  gamma: number;
  /** GAE lambda (algorithm.lam). */
  lam: number;
}

export function maskedGae(batch: AdvantageBatch, options: MaskedGaeOptions): AdvantageOutput {
  return tokenLevelGae(batch, options);
}
