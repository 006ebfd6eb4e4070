/**
 * vagen's in-process generation engine.
 *
 *   const { engine, builder } = loadEngine("/models/Qwen2.5-VL-3B-Instruct", { kv_cache_gib: 16 });
 *   const r = await engine.generate({ prompt: builder.buildPrompt(messages), sessionId: "episode-7",
 *                                     sampling: { temperature: 0.7, topP: 0.95, maxNewTokens: 256 } });
 *   r.tokenIds; r.logprobs; r.text; r.cachedPromptTokens
 *
 * Layers, each behind a small seam:
 *   engine.ts        continuous-batching scheduler (queues, stop rules, streaming), tensor-free
 *   slots.ts         KV slot ownership: running sequences, idle sessions, LRU eviction
 *   step-runner.ts   the scheduler <-> tensor seam; model-runner.ts implements it
 *   kv-cache.ts      preallocated slot KV cache and the attention over it
 *   decode-graphs.ts CUDA-graph decode steps per (batch bucket, attention window)
 *   sampler.ts       greedy / temperature / top-k / top-p sampling on the device
 * and from src/models, the family seam: a `ModelFamily` builds prompts and runs the
 * decoder over the cache's `AttentionBackend`.
 */
export { Engine, type EngineOptions } from "./engine.ts";
export type { FamilyDecoder, ModelFamily, ModelSpec } from "../models/family.ts";
export type { AttentionBackend, AttentionInput } from "../models/attention.ts";
export type { ChatPromptBuilder } from "./chat.ts";
export { ModelRunner, type ModelRunnerOptions } from "./model-runner.ts";
export { SlotKvCache, planKvCache, kvBytesPerToken, type KvCachePlan } from "./kv-cache.ts";
export { loadEngine, createEngine, EngineSettings, describePlan, type LoadedEngine } from "./load.ts";
export { imageKey } from "./prompt.ts";
export type * from "./types.ts";
