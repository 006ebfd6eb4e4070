/**
 * What the trajectory estimators share: stitching the batch into packed trajectories on
 * the way in, and unpacking, whitening and publishing turn ids on the way out
 * (VAGEN main's `_Packed.emit`).
 */
import * as torch from "../../torch/index.ts";
import type { Tensor } from "../../torch/index.ts";
import { packTokens, stitchTrajectories, tokenFlag, turnIdTensor, uniqueRowWeight, unpackTokens, type TrajectoryLayout } from "../trajectory.ts";
import { maskedWhiten } from "../whiten.ts";
import type { AdvantageBatch, AdvantageOutput } from "./types.ts";

export interface PackedBatch {
  layout: TrajectoryLayout;
  /** [B, T] the response mask in the rewards' dtype. */
  mask: Tensor;
  /** [N, L] packed rewards, values (zeros without a critic) and the 0/1 valid flag. */
  rewards: Tensor;
  values: Tensor;
  valid: Tensor;
}

export function packBatch(batch: AdvantageBatch): PackedBatch {
  const layout = stitchTrajectories(batch);
  const rewards = batch.tokenLevelRewards;
  const mask = batch.responseMask.to(rewards.dtype);
  const values = batch.values ? batch.values.to(rewards.dtype) : torch.zerosLike(rewards);
  return {
    layout,
    mask,
    rewards: packTokens(layout, rewards),
    values: packTokens(layout, values),
    valid: tokenFlag(layout, "valid", rewards),
  };
}

/**
 * packed advantages and returns [N, L] -> outputs [B, T]: advantages whitened over the
 * unique rows' model tokens then zeroed off them; returns as they are; turn ids.
 */
export function emitTokenOutputs(packed: PackedBatch, advantages: Tensor, returns: Tensor, opts: { whiten: boolean; turnIds: boolean }): AdvantageOutput {
  const { layout, mask } = packed;
  let rowAdvantages = unpackTokens(layout, advantages);
  if (opts.whiten) rowAdvantages = maskedWhiten(rowAdvantages, mask.mul(uniqueRowWeight(layout, mask)));
  return {
    advantages: rowAdvantages.mul(mask),
    returns: unpackTokens(layout, returns),
    ...(opts.turnIds ? { turnIds: turnIdTensor(layout, mask.device) } : {}),
  };
}
