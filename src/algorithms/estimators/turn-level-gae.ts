/**
 * `turn_level_gae` (main 2026 §1.6, successor of `no_concat_gae`): GAE over turns.
 *
 * Per trajectory and turn t (turns from the mask, see ../trajectory.ts):
 *   R_t = sum of the rewards of the turn's tokens (mid-turn span rewards included)
 *   V_t = the value at the turn's first token, V(s_t)
 *   A   = backwardGae over turns: delta_t = R_t + gamma V_{t+1} - V_t, A_t = delta_t + gamma lam A_{t+1}
 *
 * Every token of turn t gets A_t (then whitened). The critic is trained only at the turn
 * starts: returns are A_t + V_t there and `ignoreReturn` (-100) everywhere else, and the
 * value mask is 1 exactly at the turn starts. Turn ids are published.
 *
 * Shapes: batch tensors [B, T]; outputs [B, T]; internally [N, K] per turn.
 */
import * as torch from "../../torch/index.ts";
import type { AdvantageBatch, AdvantageOutput } from "./types.ts";
import { backwardGae } from "./gae-recursion.ts";
import { emitTokenOutputs, packBatch } from "./packed.ts";
import { atTurnFirst, spreadTurns, sumPerTurn, tokenFlag, unpackTokens } from "../trajectory.ts";

export interface TurnLevelGaeOptions {
  /** Discount per turn (algorithm.gamma). */
  gamma: number;
  /** GAE lambda across turns (algorithm.lam). */
  lam: number;
  /** Sentinel written to returns where the critic is not trained (algorithm.ignore_return). */
  ignoreReturn: number;
}

export function turnLevelGae(batch: AdvantageBatch, { gamma, lam, ignoreReturn }: TurnLevelGaeOptions): AdvantageOutput {
  // Only the outputs leave: every intermediate tensor is freed here.
  return torch.tidy(() => {
    const packed = packBatch(batch);
    const { layout } = packed;
    const turnRewards = sumPerTurn(layout, packed.rewards); // [N, K]
    const turnValues = atTurnFirst(layout, packed.values); // [N, K]
    const turnAdvantages = backwardGae(turnRewards, turnValues, gamma, lam);

    const advantages = spreadTurns(layout, turnAdvantages); // [N, L]
    const turnStart = tokenFlag(layout, "turnStart", packed.rewards);
    const startReturns = spreadTurns(layout, turnAdvantages.add(turnValues)).mul(turnStart);
    const out = emitTokenOutputs(packed, advantages, startReturns, { whiten: true, turnIds: true });

    const valueMask = unpackTokens(layout, turnStart);
    return { ...out, returns: torch.where(valueMask.gt(0), out.returns, ignoreReturn), valueMask };
  });
}
