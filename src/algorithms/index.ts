/**
 * src/algorithms: pure tensor functions for RL training (advantage estimators, losses,
 * KL, filters). Each block below re-exports one part of the layer.
 */

// ---- losses: aggregation, policy and value losses, KL, log-probs, mismatch, filters ----
export { LOSS_AGG_MODES, isLossAggMode, aggregateLoss, lossNormalizer, maskedMean, maskedSum, type LossAggMode, type LossNormalizer } from "./aggregate.ts";
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
  klLoss,
  applyKlPenalty,
  KlControlConfig,
  FixedKlController,
  AdaptiveKlController,
  createKlController,
  type KlPenalty,
  type KlController,
  type KlRewardResult,
} from "./kl.ts";
export { tokenLogProbs, type TokenLogProbOptions, type TokenLogProbs } from "./entropy.ts";
export { ROLLOUT_IS_LEVELS, ROLLOUT_RS_LEVELS, rolloutCorrection, type RolloutCorrection, type RolloutCorrectionOptions, type RolloutIsLevel, type RolloutRsLevel } from "./mismatch.ts";
export { rewardVarianceFilter, rewardVarianceTopPFilter, rowRewards, type FilterResult, type GroupedRewards } from "./filters.ts";
export { readMetrics, type LossMetrics } from "./metrics.ts";

// ---- advantage estimators: registry, estimators, trajectory stitching, whitening ----
export type { AdvantageBatch, AdvantageOutput } from "./estimators/types.ts";
export { defaultGae, type DefaultGaeOptions } from "./estimators/default-gae.ts";
export { tokenLevelGae, type TokenLevelGaeOptions } from "./estimators/token-level-gae.ts";
export { turnLevelGae, type TurnLevelGaeOptions } from "./estimators/turn-level-gae.ts";
export { biLevelGae, type BiLevelGaeOptions } from "./estimators/bi-level-gae.ts";
export { trajectoryGrpo, type TrajectoryGrpoOptions } from "./estimators/trajectory-grpo.ts";
export { verlGae, type VerlGaeOptions } from "./estimators/verl-gae.ts";
export { verlGrpo, type VerlGrpoOptions } from "./estimators/verl-grpo.ts";
export { rloo } from "./estimators/rloo.ts";
export { biLevelGaePaper, type BiLevelGaePaperOptions } from "./estimators/bi-level-gae-paper.ts";
export { maskedGae, type MaskedGaeOptions } from "./estimators/masked-gae.ts";
export { turnWiseGae, type TurnWiseGaeOptions } from "./estimators/turn-wise-gae.ts";
export { gigpo, type GigpoOptions } from "./estimators/gigpo.ts";
export { backwardGae } from "./estimators/gae-recursion.ts";
export {
  DEFAULT_ESTIMATOR,
  algorithmParamsSchema,
  computeAdvantages,
  estimatorNames,
  getEstimator,
  resolveAlgorithmParams,
  validateEstimatorSetup,
  type AlgorithmParams,
  type EstimatorSetup,
  type EstimatorSpec,
  type ResolvedEstimator,
} from "./registry.ts";
export { stitchTrajectories, type RowIdentity, type Trajectory, type TrajectoryLayout } from "./trajectory.ts";
export { maskedWhiten } from "./whiten.ts";
