/**
 * `trajectory_grpo` (main 2026 §1.8): GRPO over whole episodes.
 *
 *   G_n = sum of the rewards at the model tokens of trajectory n (all its rows)
 *   c_n = G_n - mean(G over n's group)                      group = first row's group uid
 *   A_n = c_n / (sigma + 1e-6)   if normAdvByStd (sigma: population std of the group)
 *   A_n = c_n                    otherwise
 *   A_n = 0                      when every G of the group is the same (so one-member groups get 0)
 *
 * A_n is broadcast to every model token of the trajectory's rows; returns = advantages.
 * No critic, no whitening, no turn ids.
 *
 * Shapes: batch tensors [B, T]; outputs [B, T]; internally [N] per trajectory.
 */
import * as torch from "../../torch/index.ts";
import type { AdvantageBatch, AdvantageOutput } from "./types.ts";
import { groupBy, groupStats } from "./groups.ts";
import { packBatch } from "./packed.ts";
import { unpackTokens } from "../trajectory.ts";

export interface TrajectoryGrpoOptions {
  /** Divide by the group's std (algorithm.norm_adv_by_std_in_grpo, true). */
  normAdvByStd: boolean;
}

export function trajectoryGrpo(batch: AdvantageBatch, { normAdvByStd }: TrajectoryGrpoOptions): AdvantageOutput {
  // Only the outputs leave: every intermediate tensor is freed here.
  return torch.tidy(() => {
    const packed = packBatch(batch);
    const { layout } = packed;
    const scores = packed.rewards.sum(1); // [N]
    const groups = groupBy(layout.trajectories.map((t) => t.group));
    const stats = groupStats(scores, groups, { unbiased: false });

    let perTrajectory = scores.sub(stats.mean);
    if (normAdvByStd) perTrajectory = perTrajectory.div(stats.std.add(1e-6));
    perTrajectory = perTrajectory.mul(stats.flat.rsub(1)); // zero-spread groups get 0

    const advantages = unpackTokens(layout, packed.valid.mul(perTrajectory.unsqueeze(1)));
    return { advantages, returns: advantages };
  });
}
