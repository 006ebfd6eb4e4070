/** `vagen eval`: config, runner, per-episode outputs and summaries. */
export { EvalConfig, EnvEvalSpec, HarnessSpec, episodeSeeds, episodeSeedsForTag, harnessNameAndOptions } from "./config.ts";
export { runEvaluation, buildSummary, type EnvFactory, type EvalDependencies, type EvalResult } from "./runner.ts";
export { episodeMetrics, episodeSuccess, finishedNormally, turnFormatError, type EpisodeMetrics } from "./episode-metrics.ts";
export { summarizeEnv, formatSummaryTable, type EvalSummary, type EnvSummary } from "./summary.ts";
export { episodeDir, summaryPath, observationImageName } from "./layout.ts";
export { BarReporter, LogReporter, type EvalReporter, type EvalProgress } from "./progress.ts";
