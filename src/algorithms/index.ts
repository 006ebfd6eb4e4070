/**
 * src/algorithms: pure tensor functions for RL training (advantage estimators, losses,
 * KL, filters). Each block below re-exports one part of the layer.
 */

// ---- losses: aggregation, policy and value losses, KL, log-probs, mismatch, filters ----
export { LOSS_AGG_MODES, isLossAggMode, aggregateLoss, maskedMean, maskedSum, type LossAggMode, type AggregateOptions } from "./aggregate.ts";
export {
  POLICY_LOSS_MODES,
  policyLoss,
  ppoClipLoss,
  gspoLoss,
  turnPolicyLoss,
  type PolicyLossMode,
  type PolicyLossInputs,
  type PolicyLossOptions,
  type PolicyLossResult,
  type ClipRange,
} from "./policy-loss.ts";
export { valueLoss, type ValueLossInputs, type ValueLossOptions } from "./value-loss.ts";
export {
  KL_PENALTIES,
  klPenalty,
  fullKl,
  klLoss,
  applyKlPenalty,
  KlControlConfig,
  FixedKlController,
  AdaptiveKlController,
  createKlController,
  type KlPenalty,
  type SampledKlPenalty,
  type KlController,
  type KlRewardResult,
} from "./kl.ts";
export { tokenLogProbs, entropyFromLogits, type TokenLogProbOptions, type TokenLogProbs } from "./entropy.ts";
export { truncatedImportanceWeights, type TruncatedIsResult } from "./mismatch.ts";
export { rewardVarianceFilter, rewardVarianceTopPFilter, rowRewards, type FilterResult, type GroupedRewards } from "./filters.ts";
export { readMetrics, type LossMetrics } from "./metrics.ts";
