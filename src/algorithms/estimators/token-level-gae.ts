/**
 * `token_level_gae` (main 2026 §1.5): token-level GAE over the packed trajectory with the
 * rewards where the rollout placed them (per token, per span, or at each turn's end):
 *
 *   A = backwardGae(r, V, gamma, lam)      returns R = A + V
 *
 * Observation gaps and row seams are crossed undiscounted (they are not in the packed
 * sequence). Advantages are whitened; turn ids are published.
 *
 * Shapes: batch tensors [B, T]; outputs [B, T].
 */
import * as torch from "../../torch/index.ts";
import type { AdvantageBatch, AdvantageOutput } from "./types.ts";
import { backwardGae } from "./gae-recursion.ts";
import { emitTokenOutputs, packBatch } from "./packed.ts";

export interface TokenLevelGaeOptions {
  /** Discount per token (algorithm.gamma). */
  gamma: number;
  /** GAE lambda (algorithm.lam). */
  lam: number;
}

export function tokenLevelGae(batch: AdvantageBatch, { gamma, lam }: TokenLevelGaeOptions): AdvantageOutput {
  // Only the outputs leave: every intermediate tensor is freed here.
  return torch.tidy(() => {
    const packed = packBatch(batch);
    const advantages = backwardGae(packed.rewards, packed.values, gamma, lam);
    const returns = advantages.add(packed.values).mul(packed.valid);
    return emitTokenOutputs(packed, advantages, returns, { whiten: true, turnIds: true });
  });
}
