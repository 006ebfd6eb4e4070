/**
 * vagen's RL algorithms: pure tensor functions over src/torch. Everything above
 * src/algorithms imports only this file.
 */

// Advantage estimators, their registry, trajectory stitching and whitening.
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
export { maskedMean, maskedVar, maskedWhiten } from "./whiten.ts";
