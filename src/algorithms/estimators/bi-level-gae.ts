/**
 * `bi_level_gae`, VAGEN main's "variable-clock" bi-level GAE (main 2026 §1.7).
 *
 * One backward recursion over the packed model tokens whose clock ticks only at turn
 * boundaries:
 *
 *   g_i = gammaTurn  at a turn's last token, else 1
 *   l_i = lambdaTurn at a turn's last token, else lambdaToken
 *   A_BL = backwardGae(r, V, g, l)
 *
 * Crossing a turn costs gammaTurn once however long the turn is; token time is
 * undiscounted (the estimator requires algorithm.gamma = 1). At the trajectory's last
 * token the next value and advantage are 0, so gammaTurn has no effect there.
 *
 * The result is mixed with token-level GAE at gamma = 1, lambda = lambdaToken
 * (A_TOK = backwardGae(r, V, 1, lambdaToken), rewards as placed, not lumped):
 *   A = A_BL                             when biLevelMix is exactly 1
 *   A = A_TOK + biLevelMix (A_BL - A_TOK) otherwise
 * before whitening, so mix 0 gives A_TOK and mix 1 gives A_BL exactly. Returns are
 * A + V (the mixture, unwhitened) at every model token; turn ids are published.
 *
 * Shapes: batch tensors [B, T]; outputs [B, T].
 */
import * as torch from "../../torch/index.ts";
import type { AdvantageBatch, AdvantageOutput } from "./types.ts";
import { backwardGae } from "./gae-recursion.ts";
import { emitTokenOutputs, packBatch } from "./packed.ts";
import { tokenFlag } from "../trajectory.ts";

export interface BiLevelGaeOptions {
  /** Discount charged once per turn boundary (algorithm.gamma_turn, 0.95). */
  gammaTurn: number;
  /** Lambda at turn boundaries (algorithm.lambda_turn, 0.95). */
  lambdaTurn: number;
  /** Lambda inside a turn (algorithm.lambda_token, 1.0). */
  lambdaToken: number;
  /** Weight of the bi-level advantage against token-level GAE (algorithm.bi_level_mix, 0.75). */
  biLevelMix: number;
}

export function biLevelGae(batch: AdvantageBatch, { gammaTurn, lambdaTurn, lambdaToken, biLevelMix }: BiLevelGaeOptions): AdvantageOutput {
  // Only the outputs leave: every intermediate tensor is freed here.
  return torch.tidy(() => {
    const packed = packBatch(batch);
    // 0/1 flag in the rewards' dtype, so the per-position factors keep full precision.
    const boundary = tokenFlag(packed.layout, "boundary", packed.rewards);
    const discount = boundary.mul(gammaTurn - 1).add(1); // gammaTurn at boundaries, else 1
    const lambda = boundary.mul(lambdaTurn - lambdaToken).add(lambdaToken); // lambdaTurn at boundaries, else lambdaToken

    const biLevel = backwardGae(packed.rewards, packed.values, discount, lambda);
    let advantages = biLevel;
    if (biLevelMix !== 1) {
      const tokenLevel = backwardGae(packed.rewards, packed.values, 1, lambdaToken);
      advantages = tokenLevel.add(biLevel.sub(tokenLevel).mul(biLevelMix));
    }
    const returns = advantages.add(packed.values).mul(packed.valid);
    return emitTokenOutputs(packed, advantages, returns, { whiten: true, turnIds: true });
  });
}
