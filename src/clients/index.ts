/** The inference-client seam and its implementations. See types.ts. */
export * from "./types.ts";
export { InferenceError, isAbortError } from "./errors.ts";
export { OpenAICompatibleClient, type OpenAIClientOptions, type RetryEvent } from "./openai-client.ts";
export { RequestGate, sleep } from "./request-gate.ts";
export { backoffDelay, parseRetryAfter, DEFAULT_RETRY_POLICY, type RetryPolicy } from "./retry.ts";
export { ModelConfig, SamplingConfig, createClient, toSamplingParams } from "./config.ts";
