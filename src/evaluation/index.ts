/** `vagen eval`: config, plan, runner and its events, per-episode outputs and summaries. */
export { EvalConfig, EnvEvalSpec, HarnessSpec, evalConfigKind, loadEvalConfig, loadEvalPlan } from "./config.ts";
export { buildEvalPlan, envSpecSeeds, harnessChoice, planEnvSpecs, type EnvSpec, type EvalPlan, type HarnessChoice, type PlannedEnv, type PlannedEpisode, type SeededEpisode } from "./plan.ts";
export { runEvaluation, buildSummary, type EnvFactory, type EvalDependencies, type EvalResult } from "./runner.ts";
export type { EvalEvent, EvalEventListener, EvalProgress } from "./events.ts";
export { episodeMetrics, episodeSuccess, finishedNormally, turnFormatError, type EpisodeJudgeCounts, type EpisodeMetrics } from "./episode-metrics.ts";
export { summarizeEnv, formatSummaryTable, summaryWarnings, type EvalSummary, type EnvSummary, type JudgeTotals } from "./summary.ts";
export { OutputWriteError, guardWrite, writeFailure, EVAL_WRITE_HINT } from "./write-error.ts";
export { episodeDir, summaryPath, observationImageName } from "./layout.ts";
