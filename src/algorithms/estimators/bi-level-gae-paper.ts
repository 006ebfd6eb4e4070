/**
 * `bi_level_gae_paper`: the VAGEN paper's Bi-Level GAE (VAGEN-Full), as the legacy verl
 * fork computes it (`compute_bi_level_gae_advantage_return`, spec §8.3), over stitched
 * trajectories. Two passes:
 *
 * 1. Turn level, over each turn's last token e (gamma_h = highLevelGamma):
 *      delta_e = r_e + gamma_h V(e_next) - V(e)       V(e_next) = 0 after the last turn
 *      A_e     = delta_e + gamma_h lam A_{e_next}
 *    and the reward at e is replaced by R_e = A_e + V(e).
 * 2. Token level, over the model tokens with gamma = algorithm.gamma, restarting at every
 *    turn end (next value and advantage 0 there), so the end token's advantage is A_e and
 *    the tokens before it discount back from R_e:
 *      A = backwardGae(r', V, g, lam)   with g_i = 0 at turn ends, gamma elsewhere
 *
 * Returns A + V at every model token; advantages whitened; turn ids published.
 *
 * As in the legacy code, the turn pass reads only the reward at the turn's last token
 * and the value there; rewards placed earlier in a turn (a KL penalty, a span reward)
 * stay in place for the token pass. VAGEN main's intermediate port summed each turn's
 * rewards onto its end first; both agree when rewards sit at turn ends, as env rewards do.
 *
 * Shapes: batch tensors [B, T]; outputs [B, T].
 */
import * as torch from "../../torch/index.ts";
import type { AdvantageBatch, AdvantageOutput } from "./types.ts";
import { backwardGae } from "./gae-recursion.ts";
import { emitTokenOutputs, packBatch } from "./packed.ts";
import { atTurnLast, spreadTurns, tokenFlag } from "../trajectory.ts";

export interface BiLevelGaePaperOptions {
  /** Discount inside a turn (algorithm.gamma; the paper's gamma_token, 1.0). */
  gamma: number;
  /** Lambda of both passes (algorithm.lam). */
  lam: number;
  /** Discount between turns (algorithm.high_level_gamma; the paper used 0.95). */
  highLevelGamma: number;
}

export function biLevelGaePaper(batch: AdvantageBatch, { gamma, lam, highLevelGamma }: BiLevelGaePaperOptions): AdvantageOutput {
  // Only the outputs leave: every intermediate tensor is freed here.
  return torch.tidy(() => {
    const packed = packBatch(batch);
    const { layout } = packed;

    // Pass 1: GAE over turn ends.
    const endRewards = atTurnLast(layout, packed.rewards); // [N, K]
    const endValues = atTurnLast(layout, packed.values); // [N, K]
    const turnAdvantages = backwardGae(endRewards, endValues, highLevelGamma, lam);
    const turnReturns = spreadTurns(layout, turnAdvantages.add(endValues)); // [N, L]

    // Pass 2: token GAE, the reward at each turn end replaced by that turn's return.
    const boundary = tokenFlag(layout, "boundary", packed.rewards);
    const rewards = packed.rewards.mul(boundary.rsub(1)).add(turnReturns.mul(boundary));
    const discount = boundary.rsub(1).mul(gamma); // 0 at turn ends: the recursion restarts
    const advantages = backwardGae(rewards, packed.values, discount, lam);
    const returns = advantages.add(packed.values).mul(packed.valid);
    return emitTokenOutputs(packed, advantages, returns, { whiten: true, turnIds: true });
  });
}
