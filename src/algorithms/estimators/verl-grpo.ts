/**
 * verl's `grpo` (`compute_grpo_outcome_advantage`, spec §8.2): outcome GRPO per row. It
 * does not stitch rows, so it is refused when an episode spans rows.
 *
 *   s_b = sum of row b's rewards (all positions, as verl)
 *   group of size 1: mean 0, std 1 (so A = s);  else mean and unbiased std of the group
 *   A_b = (s_b - mean) / (std + 1e-6)   if normAdvByStd, else s_b - mean
 *
 * broadcast x response mask; returns = advantages.
 *
 * Shapes: batch tensors [B, T]; outputs [B, T].
 */
import * as torch from "../../torch/index.ts";
import type { AdvantageBatch, AdvantageOutput } from "./types.ts";
import { groupBy, groupStats } from "./groups.ts";

export interface VerlGrpoOptions {
  /** Divide by the group's std (algorithm.norm_adv_by_std_in_grpo, true). */
  normAdvByStd: boolean;
}

export const VERL_GRPO_EPSILON = 1e-6;

export function verlGrpo(batch: AdvantageBatch, { normAdvByStd }: VerlGrpoOptions): AdvantageOutput {
  // Only the outputs leave: every intermediate tensor is freed here.
  return torch.tidy(() => {
    const rewards = batch.tokenLevelRewards;
    const mask = batch.responseMask.to(rewards.dtype);
    const scores = rewards.sum(1); // [B]
    const stats = groupStats(scores, groupBy(batch.groupIds), { unbiased: true });

    // A singleton group uses mean 0 and std 1: mean * shared, std * shared + (1 - shared).
    const mean = stats.mean.mul(stats.shared);
    const std = stats.std.mul(stats.shared).add(stats.shared.rsub(1));
    let perRow = scores.sub(mean);
    if (normAdvByStd) perRow = perRow.div(std.add(VERL_GRPO_EPSILON));
    const advantages = mask.mul(perRow.unsqueeze(1));
    return { advantages, returns: advantages };
  });
}
