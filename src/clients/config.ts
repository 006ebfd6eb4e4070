/**
 * The `model:` section of a config: which backend answers and how requests are sent.
 * Keys are snake_case like the rest of vagen's YAML.
 */
import * as v from "valibot";
import { EngineSettings } from "../engine/load.ts";
import { createEngineClient } from "./engine-client.ts";
import { OpenAICompatibleClient, type RetryEvent } from "./openai-client.ts";
import type { InferenceClient, SamplingParams } from "./types.ts";

const positive = (what: string) => v.pipe(v.number(), v.minValue(0, `${what} >= 0`));

export const SamplingConfig = v.strictObject({
  temperature: v.optional(v.pipe(v.number(), v.minValue(0))),
  top_p: v.optional(v.pipe(v.number(), v.minValue(0), v.maxValue(1))),
  /** Per-turn generation limit. */
  max_tokens: v.optional(v.pipe(v.number(), v.integer(), v.minValue(1))),
  stop: v.optional(v.array(v.string())),
  seed: v.optional(v.pipe(v.number(), v.integer())),
});
export type SamplingConfig = v.InferOutput<typeof SamplingConfig>;

/** Backends that speak the OpenAI chat-completions API; all use the same HTTP client. */
export const OPENAI_COMPATIBLE_BACKENDS = ["openai", "vllm", "sglang", "openrouter", "together"] as const;

export const OpenAIBackendConfig = v.strictObject({
  backend: v.picklist(OPENAI_COMPATIBLE_BACKENDS, `one of ${OPENAI_COMPATIBLE_BACKENDS.join(", ")}`),
  /** e.g. http://127.0.0.1:8000/v1 */
  base_url: v.pipe(v.string(), v.url("an http(s) URL such as http://127.0.0.1:8000/v1")),
  model: v.pipe(v.string(), v.minLength(1, "a model name")),
  /** The environment variable that holds the API key (the key itself never goes in a config). */
  api_key_env: v.optional(v.pipe(v.string(), v.regex(/^[A-Za-z_][A-Za-z0-9_]*$/, "an environment variable name"))),
  timeout_s: v.optional(v.pipe(v.number(), v.gtValue(0, "timeout_s > 0")), 120),
  max_retries: v.optional(v.pipe(v.number(), v.integer(), v.minValue(0)), 6),
  min_backoff_s: v.optional(positive("min_backoff_s"), 0.5),
  max_backoff_s: v.optional(positive("max_backoff_s"), 8),
  /** Cap on how long a server's Retry-After may make us wait. */
  max_retry_after_s: v.optional(positive("max_retry_after_s"), 60),
  /** Requests in flight at once, shared by all episodes. */
  max_concurrency: v.optional(v.pipe(v.number(), v.integer(), v.minValue(1)), 8),
  /** Request starts per minute, shared by all episodes; 0 means unlimited. */
  requests_per_minute: v.optional(v.pipe(v.number(), v.integer(), v.minValue(0)), 0),
  sampling: v.optional(SamplingConfig, {}),
  /** Merged into every request body (backend-specific options such as top_k). */
  extra_body: v.optional(v.record(v.string(), v.unknown()), {}),
  headers: v.optional(v.record(v.string(), v.string()), {}),
});
export type OpenAIBackendConfig = v.InferOutput<typeof OpenAIBackendConfig>;

/**
 * A model directory (Hugging Face layout: config.json, safetensors, tokenizer) run
 * in-process by vagen's own engine: no server, exact token ids and log-probs.
 */
export const EngineBackendConfig = v.strictObject({
  backend: v.literal("engine"),
  /** The model directory, relative to the working directory. */
  model_dir: v.pipe(v.string(), v.minLength(1, "a model directory")),
  /** Device, dtype, KV-cache budget ... (see `vagen serve --help` for the same knobs). */
  engine: v.optional(EngineSettings, {}),
  sampling: v.optional(SamplingConfig, {}),
});
export type EngineBackendConfig = v.InferOutput<typeof EngineBackendConfig>;

/** OpenAI-compatible servers, or a model run in-process. */
export const ModelConfig = v.variant("backend", [OpenAIBackendConfig, EngineBackendConfig]);
export type ModelConfig = v.InferOutput<typeof ModelConfig>;

export function toSamplingParams(config: SamplingConfig | undefined): SamplingParams {
  const out: SamplingParams = {};
  if (!config) return out;
  if (config.temperature !== undefined) out.temperature = config.temperature;
  if (config.top_p !== undefined) out.topP = config.top_p;
  if (config.max_tokens !== undefined) out.maxTokens = config.max_tokens;
  if (config.stop !== undefined) out.stop = config.stop;
  if (config.seed !== undefined) out.seed = config.seed;
  return out;
}

export interface CreateClientHooks {
  onRetry?: (event: RetryEvent) => void;
  env?: Record<string, string | undefined>;
}

export function createClient(config: ModelConfig, hooks: CreateClientHooks = {}): InferenceClient {
  switch (config.backend) {
    case "openai":
    case "vllm":
    case "sglang":
    case "openrouter":
    case "together":
      return new OpenAICompatibleClient({
        baseUrl: config.base_url,
        model: config.model,
        apiKeyEnv: config.api_key_env,
        timeoutMs: config.timeout_s * 1000,
        retry: {
          maxRetries: config.max_retries,
          minBackoffMs: config.min_backoff_s * 1000,
          maxBackoffMs: config.max_backoff_s * 1000,
          maxRetryAfterMs: config.max_retry_after_s * 1000,
        },
        maxConcurrency: config.max_concurrency,
        requestsPerMinute: config.requests_per_minute,
        extraBody: config.extra_body,
        headers: config.headers,
        onRetry: hooks.onRetry,
        env: hooks.env,
      });
    case "engine":
      return createEngineClient(config.model_dir, config.engine, toSamplingParams(config.sampling));
  }
}
