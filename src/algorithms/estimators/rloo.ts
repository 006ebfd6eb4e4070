/**
 * verl's `rloo` (`compute_rloo_outcome_advantage`, RLOO of Ahmadian et al. 2024): each
 * row's baseline is the mean of the other rows of its group. Per row; refused when an
 * episode spans rows.
 *
 *   s_b = sum of row b's rewards (all positions, as verl)
 *   A_b = s_b n/(n-1) - mean n/(n-1) = s_b - (sum of the others)/(n-1)   for a group of n > 1
 *   A_b = s_b                                                          for a group of 1
 *
 * broadcast x response mask; returns = advantages.
 *
 * Shapes: batch tensors [B, T]; outputs [B, T].
 */
import * as torch from "../../torch/index.ts";
import type { AdvantageBatch, AdvantageOutput } from "./types.ts";
import { groupBy, groupStats } from "./groups.ts";

export function rloo(batch: AdvantageBatch): AdvantageOutput {
  // Only the outputs leave: every intermediate tensor is freed here.
  return torch.tidy(() => {
    const rewards = batch.tokenLevelRewards;
    const mask = batch.responseMask.to(rewards.dtype);
    const scores = rewards.sum(1); // [B]
    const groups = groupBy(batch.groupIds);
    const stats = groupStats(scores, groups, { unbiased: false });

    // n / (n - 1) per row, 1 for singletons (whose mean term is dropped below).
    const sizes = Float64Array.from(groups.of, (g) => groups.sizes[g]!);
    const scale = torch.tensor(sizes.map((n) => (n > 1 ? n / (n - 1) : 1)), [sizes.length], { dtype: scores.dtype, device: scores.device });
    const perRow = scores.sub(stats.mean.mul(stats.shared)).mul(scale);
    const advantages = mask.mul(perRow.unsqueeze(1));
    return { advantages, returns: advantages };
  });
}
