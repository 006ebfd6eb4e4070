/**
 * Qwen2.5-VL's config.json, in every shape transformers has written it: the published
 * flat layout (text keys at the top level, `rope_scaling.mrope_section`), the 4.5x
 * nested `text_config`, and the 5.x `rope_parameters`. Validated with valibot, then
 * normalised into one typed `Qwen25VLConfig`.
 */
import * as v from "valibot";
import { existsSync } from "node:fs";
import { join } from "node:path";
import { validate } from "../../config/index.ts";
import { VagenError } from "../../core/errors.ts";
import { readJson } from "../tokenizer.ts";

const PositiveInt = v.pipe(v.number(), v.integer(), v.minValue(1));
const TokenId = v.pipe(v.number(), v.integer(), v.minValue(0));

const RopeSchema = v.looseObject({
  mrope_section: v.optional(v.array(PositiveInt)),
  rope_theta: v.optional(v.number()),
  type: v.optional(v.string()),
  rope_type: v.optional(v.string()),
});

const TextSchema = v.looseObject({
  vocab_size: PositiveInt,
  hidden_size: PositiveInt,
  intermediate_size: PositiveInt,
  num_hidden_layers: PositiveInt,
  num_attention_heads: PositiveInt,
  num_key_value_heads: v.optional(PositiveInt),
  hidden_act: v.optional(v.literal("silu"), "silu"),
  rms_norm_eps: v.optional(v.number(), 1e-6),
  rope_theta: v.optional(v.number()),
  rope_scaling: v.optional(v.nullable(RopeSchema)),
  rope_parameters: v.optional(v.nullable(RopeSchema)),
  tie_word_embeddings: v.optional(v.boolean()),
  use_sliding_window: v.optional(v.boolean(), false),
  max_position_embeddings: v.optional(PositiveInt),
});

const VisionSchema = v.looseObject({
  depth: PositiveInt,
  hidden_size: PositiveInt,
  hidden_act: v.optional(v.literal("silu"), "silu"),
  intermediate_size: PositiveInt,
  num_heads: PositiveInt,
  in_channels: v.optional(PositiveInt),
  in_chans: v.optional(PositiveInt),
  patch_size: v.optional(PositiveInt, 14),
  spatial_merge_size: v.optional(PositiveInt, 2),
  temporal_patch_size: v.optional(PositiveInt, 2),
  tokens_per_second: v.optional(v.number(), 2),
  window_size: v.optional(PositiveInt, 112),
  out_hidden_size: PositiveInt,
  fullatt_block_indexes: v.array(v.pipe(v.number(), v.integer(), v.minValue(0))),
});

export const Qwen25VLConfigFileSchema = v.looseObject({
  model_type: v.optional(v.picklist(["qwen2_5_vl"])),
  text_config: v.optional(v.looseObject({})),
  vision_config: VisionSchema,
  image_token_id: v.optional(TokenId, 151655),
  video_token_id: v.optional(TokenId, 151656),
  vision_start_token_id: v.optional(TokenId, 151652),
  vision_end_token_id: v.optional(TokenId, 151653),
  tie_word_embeddings: v.optional(v.boolean()),
  eos_token_id: v.optional(v.union([TokenId, v.array(TokenId)])),
  bos_token_id: v.optional(v.nullable(TokenId)),
});

export interface Qwen25VLTextConfig {
  vocabSize: number;
  hiddenSize: number;
  intermediateSize: number;
  numLayers: number;
  numHeads: number;
  numKvHeads: number;
  headDim: number;
  rmsNormEps: number;
  ropeTheta: number;
  /** Rotary frequency pairs given to the temporal, height and width position ids. */
  mropeSection: [number, number, number];
  tieWordEmbeddings: boolean;
}

export interface Qwen25VLVisionConfig {
  depth: number;
  hiddenSize: number;
  intermediateSize: number;
  numHeads: number;
  headDim: number;
  inChannels: number;
  patchSize: number;
  spatialMergeSize: number;
  temporalPatchSize: number;
  windowSize: number;
  outHiddenSize: number;
  fullAttentionBlocks: number[];
  tokensPerSecond: number;
}

export interface Qwen25VLConfig {
  text: Qwen25VLTextConfig;
  vision: Qwen25VLVisionConfig;
  imageTokenId: number;
  videoTokenId: number;
  visionStartTokenId: number;
  visionEndTokenId: number;
  eosTokenIds: number[];
}

/** Read and normalise `dir/config.json`. */
export function loadQwen25VLConfig(dir: string): Qwen25VLConfig {
  const path = join(dir, "config.json");
  if (!existsSync(path)) throw new VagenError(`${path}: file not found`, "pass a Hugging Face model directory");
  return parseQwen25VLConfig(readJson(path), path);
}

export function parseQwen25VLConfig(raw: unknown, file = "config.json"): Qwen25VLConfig {
  const top = validate(Qwen25VLConfigFileSchema, raw, { file });
  // Text keys live in text_config (4.5x+) or at the top level (the published checkpoints).
  const textRaw = top.text_config ? { ...pickTextKeys(top), ...top.text_config } : top;
  const text = validate(TextSchema, textRaw, { file: top.text_config ? `${file} (text_config)` : file });
  const rope = text.rope_parameters ?? text.rope_scaling ?? undefined;
  const section = rope?.mrope_section;
  const headDim = text.hidden_size / text.num_attention_heads;
  if (!Number.isInteger(headDim)) {
    throw new VagenError(`${file}: hidden_size ${text.hidden_size} is not divisible by num_attention_heads ${text.num_attention_heads}`);
  }
  if (!section || section.length !== 3) {
    throw new VagenError(`${file}: key "rope_scaling.mrope_section" (or "rope_parameters.mrope_section"): expected three integers, got ${JSON.stringify(section)}`);
  }
  if (section[0]! + section[1]! + section[2]! !== headDim / 2) {
    throw new VagenError(`${file}: mrope_section ${JSON.stringify(section)} must sum to head_dim / 2 = ${headDim / 2}`);
  }
  if (text.use_sliding_window) {
    throw new VagenError(`${file}: use_sliding_window=true is not supported`, "Qwen2.5-VL checkpoints ship with use_sliding_window=false");
  }
  const vis = top.vision_config;
  const visionHeadDim = vis.hidden_size / vis.num_heads;
  if (!Number.isInteger(visionHeadDim) || visionHeadDim % 4 !== 0) {
    throw new VagenError(`${file}: vision_config.hidden_size / num_heads must be a multiple of 4, got ${visionHeadDim}`);
  }
  const eos = top.eos_token_id ?? (text as { eos_token_id?: number | number[] }).eos_token_id;
  return {
    text: {
      vocabSize: text.vocab_size,
      hiddenSize: text.hidden_size,
      intermediateSize: text.intermediate_size,
      numLayers: text.num_hidden_layers,
      numHeads: text.num_attention_heads,
      numKvHeads: text.num_key_value_heads ?? text.num_attention_heads,
      headDim,
      rmsNormEps: text.rms_norm_eps,
      ropeTheta: rope?.rope_theta ?? text.rope_theta ?? 1_000_000,
      mropeSection: [section[0]!, section[1]!, section[2]!],
      // The top-level flag wins: transformers ties from the outer config.
      tieWordEmbeddings: top.tie_word_embeddings ?? text.tie_word_embeddings ?? false,
    },
    vision: {
      depth: vis.depth,
      hiddenSize: vis.hidden_size,
      intermediateSize: vis.intermediate_size,
      numHeads: vis.num_heads,
      headDim: visionHeadDim,
      inChannels: vis.in_channels ?? vis.in_chans ?? 3,
      patchSize: vis.patch_size,
      spatialMergeSize: vis.spatial_merge_size,
      temporalPatchSize: vis.temporal_patch_size,
      windowSize: vis.window_size,
      outHiddenSize: vis.out_hidden_size,
      fullAttentionBlocks: vis.fullatt_block_indexes,
      tokensPerSecond: vis.tokens_per_second,
    },
    imageTokenId: top.image_token_id,
    videoTokenId: top.video_token_id,
    visionStartTokenId: top.vision_start_token_id,
    visionEndTokenId: top.vision_end_token_id,
    eosTokenIds: eos === undefined ? [] : Array.isArray(eos) ? eos : [eos],
  };
}

/** Top-level keys that are text defaults when a nested text_config omits them. */
function pickTextKeys(top: Record<string, unknown>): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const k of ["rope_theta", "rope_scaling", "tie_word_embeddings", "rms_norm_eps"]) if (k in top) out[k] = top[k];
  return out;
}
