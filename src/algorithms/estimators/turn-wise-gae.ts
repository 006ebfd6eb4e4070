/**
 * `turn_wise_gae`: the legacy turn-level GAE behind the paper's "Vanilla PPO" and
 * "Turn-PPO w/ Mask" rows (`compute_turn_wise_gae_advantage_return`, spec §8.3), over
 * stitched trajectories.
 *
 *   over each turn's last token e:  delta_e = r_e + gamma_h V(e_next) - V(e)
 *                                   A_e     = delta_e + gamma_h lam A_{e_next}
 *   every model token of the turn gets A_e
 *   returns R_e = A_e + V(e) at turn ends, 0 elsewhere; value mask = turn ends
 *   whitened with the mean and variance over the turn ends only (one sample per turn)
 *
 * Unlike `turn_level_gae`, the turn's reward and value are read at its last token, and
 * the critic is trained there. Turn ids are published.
 *
 * Shapes: batch tensors [B, T]; outputs [B, T].
 */
import * as torch from "../../torch/index.ts";
import type { AdvantageBatch, AdvantageOutput } from "./types.ts";
import { backwardGae } from "./gae-recursion.ts";
import { packBatch } from "./packed.ts";
import { atTurnLast, spreadTurns, tokenFlag, turnIdTensor, uniqueRowWeight, unpackTokens } from "../trajectory.ts";
import { maskedWhiten } from "../whiten.ts";

export interface TurnWiseGaeOptions {
  /** GAE lambda across turns (algorithm.lam). */
  lam: number;
  /** Discount between turns (algorithm.high_level_gamma). */
  highLevelGamma: number;
}

export function turnWiseGae(batch: AdvantageBatch, { lam, highLevelGamma }: TurnWiseGaeOptions): AdvantageOutput {
  // Only the outputs leave: every intermediate tensor is freed here.
  return torch.tidy(() => {
    const packed = packBatch(batch);
    const { layout, mask } = packed;
    const endRewards = atTurnLast(layout, packed.rewards); // [N, K]
    const endValues = atTurnLast(layout, packed.values); // [N, K]
    const turnAdvantages = backwardGae(endRewards, endValues, highLevelGamma, lam);

    const boundary = tokenFlag(layout, "boundary", packed.rewards);
    const turnEnds = unpackTokens(layout, boundary); // [B, T]
    const advantages = unpackTokens(layout, spreadTurns(layout, turnAdvantages));
    const returns = unpackTokens(layout, spreadTurns(layout, turnAdvantages.add(endValues)).mul(boundary));
    const whitened = maskedWhiten(advantages, turnEnds.mul(uniqueRowWeight(layout, mask)));
    return { advantages: whitened.mul(mask), returns, valueMask: turnEnds, turnIds: turnIdTensor(layout, mask.device) };
  });
}
