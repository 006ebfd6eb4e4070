/** World-model (state) rewards: see README.md and docs/world-model.md. */
export {
  StateRewardConfig,
  SectionRewardConfig,
  JudgeConfig,
  STATE_REWARD_SECTIONS,
  enabledSections,
  needsJudge,
  splitStateReward,
  type StateRewardConfigInput,
  type StateRewardSection,
} from "./config.ts";
export { checkStateRewardSetup, stateRewardSystemPrompt, withStateRewardPrompt, STATE_REWARD_FORMATS, type StateRewardSetup } from "./setup.ts";
export {
  StateRewardScorer,
  aggregateEpisode,
  placeRewards,
  episodeStateRewardMetrics,
  judgeMetrics,
  judgeStatsOf,
  SECTION_TAG,
  type TurnInput,
  type TurnStateReward,
  type SectionResult,
  type SectionStatus,
  type JudgeStats,
} from "./state-reward.ts";
export { creditPosition, lastTokenOverlapping, tokenEndsByPrefixDecode, tokenEndsFromBytes, tokenEndsFromPieces, type CreditSite } from "./credit.ts";
export { groupedF1, matchedF1, itemSimilarity, rescaleAboveChance } from "./f1.ts";
export { maxWeightAssignment } from "./assignment.ts";
export { sokobanPaperF1, sokobanPaperScore, exactMatchF1, TopKStringTracker } from "./paper.ts";
export { OpenAIJudge, parseRelationsReply, parseYesNo, fillTemplate, isJudgeFailure, type Judge, type JudgeFailure, type JudgeReply } from "./judge.ts";
export { judgeTrouble, JudgeFailedError, JUDGE_METRIC, JUDGE_FAILURE_ADVICE, type JudgeTrouble } from "./judge-trouble.ts";
export { applyStateRewards, stateRewardHook, meanEpisodeMetrics, type EpisodeStateRewards, type TokenEndsOf, type TurnScores } from "./episodes.ts";
