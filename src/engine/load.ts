/**
 * Building a ready engine from a model directory: load the model through its family
 * (src/models: the registry keyed by `model_type`), size the KV cache from the memory
 * budget, start the scheduler.
 */
import * as v from "valibot";
import * as torch from "../torch/index.ts";
import type { DType, Device } from "../torch/index.ts";
import { VagenError } from "../core/errors.ts";
import { loadModelFamily } from "../models/index.ts";
import type { FamilyDecoder, ModelFamily } from "../models/family.ts";
import type { ChatPromptBuilder } from "./chat.ts";
import { DEFAULT_PREFILL_WAIT_RATIO, Engine } from "./engine.ts";
import { kvBytesPerToken, planKvCache, type KvCachePlan } from "./kv-cache.ts";
import { ModelRunner } from "./model-runner.ts";

/** The `engine:` options of a config (snake_case like the rest of vagen's YAML). */
export const EngineSettings = v.strictObject({
  /** "cuda", "cuda:1" or "cpu"; default: cuda when available. */
  device: v.optional(v.pipe(v.string(), v.regex(/^(cpu|cuda(:\d+)?)$/, 'a device such as "cuda", "cuda:1" or "cpu"'))),
  /** Compute dtype; default bf16 on CUDA, f32 on the CPU. */
  dtype: v.optional(v.picklist(["f32", "bf16", "f16"])),
  /** Tokens one sequence may hold (prompt + generation). */
  max_seq_len: v.optional(v.pipe(v.number(), v.integer(), v.minValue(16)), 8192),
  /** GiB of memory for the KV cache. */
  kv_cache_gib: v.optional(v.pipe(v.number(), v.gtValue(0, "kv_cache_gib > 0"))),
  /** At most this many KV slots (concurrent sequences + idle sessions). */
  max_slots: v.optional(v.pipe(v.number(), v.integer(), v.minValue(1)), 512),
  /** Prompt tokens (with padding) one prefill step may run. */
  max_prefill_tokens: v.optional(v.pipe(v.number(), v.integer(), v.minValue(16)), 8192),
  /**
   * Prefill batching: while sequences decode, ready prompts wait up to this many scheduler
   * steps, or until they number `prefill_wait_ratio` x the decoding ones, to be prefilled
   * in one call (0: at once). See EngineOptions.prefillMaxWaitSteps. Measured on one RL
   * step of the Sokoban demo's wm recipe (256 episodes, 2,066 turns): 520 prefill calls
   * and 706 decode calls at 0, 120 and 720 at 4, 73 and 752 at 8, the same tokens sampled.
   */
  prefill_max_wait_steps: v.optional(v.pipe(v.number(), v.integer(), v.minValue(0)), 4),
  prefill_wait_ratio: v.optional(v.pipe(v.number(), v.minValue(0)), DEFAULT_PREFILL_WAIT_RATIO),
  /** Seed of the random stream unseeded requests share. */
  seed: v.optional(v.pipe(v.number(), v.integer()), 0),
  /** "fused": libtorch's SDPA kernels (flash / memory-efficient); "math": the unfused fallback. */
  attention: v.optional(v.picklist(["fused", "math"]), "fused"),
  /** Replay decode steps as CUDA graphs on CUDA devices. */
  cuda_graphs: v.optional(v.boolean(), true),
  /**
   * Keyword arguments of every chat-template rendering (transformers' apply_chat_template,
   * e.g. `{enable_thinking: false}` for Qwen3); unset: the template's own defaults.
   */
  chat_template_kwargs: v.optional(v.record(v.string(), v.unknown())),
});
export type EngineSettings = v.InferOutput<typeof EngineSettings>;

export interface LoadedEngine {
  engine: Engine;
  /** The model the engine runs (its family object: prompts, decoder, training forward). */
  model: ModelFamily;
  /** The same model, seen as the prompt builder clients and the server use. */
  builder: ChatPromptBuilder;
  runner: ModelRunner;
  plan: KvCachePlan;
  /** Frees the engine, its cache and the model weights. */
  close(): Promise<void>;
}

const DEFAULT_KV_GIB = { cpu: 1, cuda: 16 };

export function resolveDevice(requested: string | undefined): Device {
  if (requested) {
    if (requested.startsWith("cuda") && torch.torchInfo().cudaDevices === 0) {
      throw new VagenError(`device ${requested} was requested but libtorch sees no CUDA device`, "use --device cpu, or build the shim against a CUDA libtorch");
    }
    return requested as Device;
  }
  return torch.torchInfo().cudaDevices > 0 ? ("cuda" as Device) : ("cpu" as Device);
}

/**
 * Load a model directory and start an engine that owns it: `close()` frees the engine,
 * its KV cache and the weights.
 */
export function loadEngine(modelDir: string, settings: Partial<EngineSettings> = {}): LoadedEngine {
  const s = v.parse(EngineSettings, settings);
  const device = resolveDevice(s.device);
  const dtype: DType = s.dtype ?? (String(device).startsWith("cuda") ? "bf16" : "f32");
  const model = loadModelFamily(modelDir, { device, dtype, chatTemplateVariables: s.chat_template_kwargs });
  try {
    const loaded = createEngine(model, s);
    return {
      ...loaded,
      async close() {
        await loaded.close();
        model.dispose();
      },
    };
  } catch (err) {
    model.dispose();
    throw err;
  }
}

/**
 * Start an engine over a model that is already loaded, without taking it over: the
 * engine reads the model's own weight tensors, so a trainer that updates them in place
 * generates with the new weights on the next request (release sessions first: their
 * KV caches were computed with the old ones). `close()` frees the engine and its KV
 * cache; the model stays with its owner. `settings.device`/`dtype` are ignored here:
 * the engine runs where the model lives.
 */
export function createEngine(model: ModelFamily, settings: Partial<EngineSettings> = {}): LoadedEngine {
  const s = v.parse(EngineSettings, settings);
  const onCuda = String(model.spec.device).startsWith("cuda");
  const kvGib = s.kv_cache_gib ?? (onCuda ? DEFAULT_KV_GIB.cuda : DEFAULT_KV_GIB.cpu);
  const plan = planKvCache(model.spec, { maxSeqLen: s.max_seq_len, memoryBytes: kvGib * 2 ** 30, maxSlots: s.max_slots });
  const runner = new ModelRunner(model, {
    slots: plan.slots,
    slotTokens: plan.slotTokens,
    seed: s.seed,
    cudaGraphs: s.cuda_graphs,
    mathAttention: s.attention === "math",
    neverSample: model.visionTokenIds,
  });
  const engine = new Engine(runner, {
    decode: (ids) => model.decode(ids),
    tokenBytes: model.tokenBytes,
    eosTokenIds: [...model.eosTokenIds],
    maxPrefillTokens: s.max_prefill_tokens,
    prefillMaxWaitSteps: s.prefill_max_wait_steps,
    prefillWaitRatio: s.prefill_wait_ratio,
  });
  return {
    engine,
    model,
    builder: model,
    runner,
    plan,
    close: () => engine.close(),
  };
}

/** One line describing the cache, for logs. */
export function describePlan(model: FamilyDecoder, plan: KvCachePlan): string {
  const perToken = kvBytesPerToken(model.spec);
  return `KV cache: ${plan.slots} slots x ${plan.slotTokens} tokens, ${(plan.bytes / 2 ** 30).toFixed(2)} GiB (${perToken} B/token)`;
}
