/**
 * `default_gae`, VAGEN main's default estimator (main 2026 §1.4).
 *
 * The trajectory's whole reward is lumped onto its last model token, then token-level GAE
 * runs over the packed trajectory:
 *
 *   r'_i = sum of all rewards of the trajectory if i is its last token, else 0
 *   A    = backwardGae(r', V, gamma, lam)          returns R = A + V
 *
 * Under concat this equals verl's `gae` given the same end-lumped reward; under no_concat
 * and compact the episode total sits once at the episode's end, not at every row's end.
 * Advantages are whitened; turn ids are published.
 *
 * Shapes: batch tensors [B, T]; outputs [B, T].
 */
import * as torch from "../../torch/index.ts";
import type { AdvantageBatch, AdvantageOutput } from "./types.ts";
import { backwardGae } from "./gae-recursion.ts";
import { emitTokenOutputs, packBatch } from "./packed.ts";
import { tokenFlag } from "../trajectory.ts";

export interface DefaultGaeOptions {
  /** Discount per token (algorithm.gamma). */
  gamma: number;
  /** GAE lambda (algorithm.lam). */
  lam: number;
}

export function defaultGae(batch: AdvantageBatch, { gamma, lam }: DefaultGaeOptions): AdvantageOutput {
  // Only the outputs leave: every intermediate tensor is freed here.
  return torch.tidy(() => {
    const packed = packBatch(batch);
    const total = packed.rewards.sum(1, true); // [N, 1]
    const lumped = tokenFlag(packed.layout, "last", packed.rewards).mul(total);
    const advantages = backwardGae(lumped, packed.values, gamma, lam);
    const returns = advantages.add(packed.values).mul(packed.valid);
    return emitTokenOutputs(packed, advantages, returns, { whiten: true, turnIds: true });
  });
}
