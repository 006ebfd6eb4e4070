/**
 * verl's `gae` (`compute_gae_advantage_return`, spec §8.2): token GAE per row, as verl
 * runs it. It does not stitch rows, so it is refused when an episode spans rows.
 *
 *   for t = T-1 ... 0, with nextValue = 0 and lastGae = 0:
 *     delta   = r_t + gamma nextValue - V_t
 *     gae     = delta + gamma lam lastGae
 *     where mask_t = 1: nextValue <- V_t, lastGae <- gae   (observation tokens are skipped)
 *     A_t = lastGae
 *   returns = A + V;  advantages = maskedWhiten(A, mask) over all rows
 *
 * As in verl, mask-0 positions carry the next model token's advantage (whitened) and a
 * return; the losses never look at them. Rewards on mask-0 positions are dropped.
 *
 * Shapes: batch tensors [B, T]; outputs [B, T].
 */
import * as torch from "../../torch/index.ts";
import type { Tensor } from "../../torch/index.ts";
import type { AdvantageBatch, AdvantageOutput } from "./types.ts";
import { maskedWhiten } from "../whiten.ts";

export interface VerlGaeOptions {
  /** Discount per token (algorithm.gamma). */
  gamma: number;
  /** GAE lambda (algorithm.lam). */
  lam: number;
}

export function verlGae(batch: AdvantageBatch, { gamma, lam }: VerlGaeOptions): AdvantageOutput {
  // Only the outputs leave: every intermediate tensor is freed here.
  return torch.tidy(() => {
    const rewards = batch.tokenLevelRewards;
    const values = batch.values ? batch.values.to(rewards.dtype) : torch.zerosLike(rewards);
    const mask = batch.responseMask.to(rewards.dtype);
    const r = rewards.unbind(1);
    const v = values.unbind(1);
    const isModel = mask.gt(0).unbind(1);

    const width = r.length;
    const columns: Tensor[] = new Array(width);
    let nextValue: Tensor = torch.zerosLike(r[0] ?? rewards.sum(1));
    let lastGae: Tensor = nextValue;
    for (let t = width - 1; t >= 0; t--) {
      const delta = r[t]!.add(nextValue.mul(gamma)).sub(v[t]!);
      const gae = delta.add(lastGae.mul(gamma * lam));
      // The state moves only at model tokens; observation tokens keep it.
      nextValue = torch.where(isModel[t]!, v[t]!, nextValue);
      lastGae = torch.where(isModel[t]!, gae, lastGae);
      columns[t] = lastGae;
    }
    const advantages = width === 0 ? torch.zerosLike(rewards) : torch.stack(columns, 1);
    return { advantages: maskedWhiten(advantages, mask), returns: advantages.add(values) };
  });
}
