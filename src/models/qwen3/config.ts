/**
 * Qwen3's config.json (Qwen3ForCausalLM: Qwen3-0.6B to 32B, dense) in both shapes
 * transformers writes: 4.5x's top-level `rope_theta` / `rope_scaling` and 5.x's
 * `rope_parameters`. Validated with valibot and normalised into the shared decoder's
 * config (decoder.ts): no q/k/v bias, per-head q/k RMSNorm, one rotary axis.
 *
 * Defaults are transformers' Qwen3Config defaults, so a config that omits a key means
 * what it means to transformers (head_dim 128, untied embeddings, rope_theta 10000).
 */
import * as v from "valibot";
import { existsSync } from "node:fs";
import { join } from "node:path";
import { validate } from "../../config/index.ts";
import { VagenError } from "../../core/errors.ts";
import type { DecoderConfig } from "../decoder.ts";
import { readJson } from "../tokenizer.ts";

const PositiveInt = v.pipe(v.number(), v.integer(), v.minValue(1));
const TokenId = v.pipe(v.number(), v.integer(), v.minValue(0));

const RopeSchema = v.looseObject({
  rope_theta: v.optional(v.number()),
  rope_type: v.optional(v.string()),
  type: v.optional(v.string()),
});

export const Qwen3ConfigFileSchema = v.looseObject({
  model_type: v.optional(v.literal("qwen3")),
  vocab_size: PositiveInt,
  hidden_size: PositiveInt,
  intermediate_size: PositiveInt,
  num_hidden_layers: PositiveInt,
  num_attention_heads: PositiveInt,
  num_key_value_heads: v.optional(v.nullable(PositiveInt)),
  head_dim: v.optional(v.nullable(PositiveInt)),
  hidden_act: v.optional(v.literal("silu"), "silu"),
  rms_norm_eps: v.optional(v.number(), 1e-6),
  rope_theta: v.optional(v.number()),
  rope_scaling: v.optional(v.nullable(RopeSchema)),
  rope_parameters: v.optional(v.nullable(RopeSchema)),
  attention_bias: v.optional(v.boolean(), false),
  tie_word_embeddings: v.optional(v.boolean(), false),
  use_sliding_window: v.optional(v.boolean(), false),
  max_position_embeddings: v.optional(PositiveInt, 32768),
  eos_token_id: v.optional(v.nullable(v.union([TokenId, v.array(TokenId)]))),
  bos_token_id: v.optional(v.nullable(TokenId)),
});

export interface Qwen3Config {
  decoder: DecoderConfig;
  maxPositions: number;
  eosTokenIds: number[];
}

/** Read and normalise `dir/config.json`. */
export function loadQwen3Config(dir: string): Qwen3Config {
  const path = join(dir, "config.json");
  if (!existsSync(path)) throw new VagenError(`${path}: file not found`, "pass a Hugging Face model directory");
  return parseQwen3Config(readJson(path), path);
}

export function parseQwen3Config(raw: unknown, file = "config.json"): Qwen3Config {
  const c = validate(Qwen3ConfigFileSchema, raw, { file });
  const ropeKey = c.rope_parameters ? "rope_parameters" : "rope_scaling";
  const rope = c.rope_parameters ?? c.rope_scaling ?? undefined;
  const ropeType = rope?.rope_type ?? rope?.type ?? "default";
  if (ropeType !== "default") {
    throw new VagenError(
      `${file}: key "${ropeKey}.rope_type": got ${JSON.stringify(ropeType)}, expected "default" (or no ${ropeKey})`,
      "vagen's Qwen3 runs plain RoPE; scaled variants (yarn, linear, dynamic) are not implemented",
    );
  }
  if (c.attention_bias) {
    throw new VagenError(`${file}: key "attention_bias": got true, expected false`, "Qwen3 checkpoints have no attention biases");
  }
  if (c.use_sliding_window) {
    throw new VagenError(`${file}: key "use_sliding_window": got true, expected false`, "Qwen3 checkpoints ship with use_sliding_window=false");
  }
  const headDim = c.head_dim ?? 128;
  if (headDim % 2 !== 0) throw new VagenError(`${file}: key "head_dim": got ${headDim}, expected an even number (rotary pairs)`);
  const numKvHeads = c.num_key_value_heads ?? c.num_attention_heads;
  if (c.num_attention_heads % numKvHeads !== 0) {
    throw new VagenError(`${file}: key "num_key_value_heads": got ${numKvHeads}, expected a divisor of num_attention_heads ${c.num_attention_heads}`);
  }
  const eos = c.eos_token_id ?? undefined;
  return {
    decoder: {
      vocabSize: c.vocab_size,
      hiddenSize: c.hidden_size,
      intermediateSize: c.intermediate_size,
      numLayers: c.num_hidden_layers,
      numHeads: c.num_attention_heads,
      numKvHeads,
      headDim,
      rmsNormEps: c.rms_norm_eps,
      ropeTheta: rope?.rope_theta ?? c.rope_theta ?? 10_000,
      ropeSections: [headDim / 2],
      tieWordEmbeddings: c.tie_word_embeddings,
      qkvBias: false,
      qkNorm: true,
    },
    maxPositions: c.max_position_embeddings,
    eosTokenIds: eos === undefined ? [] : Array.isArray(eos) ? eos : [eos],
  };
}
