/** Agent loops (harnesses): concat, no_concat, compact, summary_compact, observation_only; registry and import-path loading. */
export * from "./types.ts";
export { defineHarness, runAgentLoop } from "./loop.ts";
export { generationLimit, generationFloor } from "./generation-limit.ts";
export { TokenConversations, type TokenCall } from "./token-conversations.ts";
export { observationToMessage, reportedSuccess, DEFAULT_IMAGE_PLACEHOLDER } from "./observation.ts";
export { concatHarness } from "./concat.ts";
export { noConcatHarness } from "./no-concat.ts";
export { observationOnlyHarness, OBSERVATION_ONLY_HARNESS } from "./observation-only.ts";
export { compactHarness, CompactOptions, summarizeTurn } from "./compact.ts";
export { summaryCompactHarness, SummaryCompactOptions, SUMMARY_REQUEST, SUMMARY_PREFIX } from "./summary-compact.ts";
export { createHarness, registerHarness, listHarnesses, isImportPath } from "./registry.ts";
