/**
 * Qwen3-VL's config.json (dense; transformers' Qwen3VLConfig): the text model's keys under
 * `text_config` (Qwen3 decoder layers with per-head q/k norms and an explicit head_dim; the
 * rotary settings in `rope_scaling` as the published checkpoints write them, or
 * `rope_parameters` as transformers 5 does: rope_theta, mrope_section; the sections are
 * always interleaved, whatever `mrope_interleaved` says, as transformers' Qwen3-VL
 * rotary embedding does),
 * the vision tower's under `vision_config` (patch 16, a learned position grid of
 * num_position_embeddings, deepstack_visual_indexes). Validated with valibot, normalised
 * into one typed `Qwen3VLConfig`; what vagen does not run is refused by file and key.
 */
import * as v from "valibot";
import { existsSync } from "node:fs";
import { join } from "node:path";
import { validate } from "../../config/index.ts";
import { VagenError } from "../../core/errors.ts";
import { readJson } from "../tokenizer.ts";

const PositiveInt = v.pipe(v.number(), v.integer(), v.minValue(1));
const Index = v.pipe(v.number(), v.integer(), v.minValue(0));

const RopeSchema = v.looseObject({
  rope_theta: v.optional(v.number()),
  mrope_section: v.optional(v.array(Index)),
  mrope_interleaved: v.optional(v.boolean()),
  rope_type: v.optional(v.string()),
  type: v.optional(v.string()),
});

const TextSchema = v.looseObject({
  vocab_size: PositiveInt,
  hidden_size: PositiveInt,
  intermediate_size: PositiveInt,
  num_hidden_layers: PositiveInt,
  num_attention_heads: PositiveInt,
  num_key_value_heads: v.optional(v.nullable(PositiveInt)),
  head_dim: v.optional(PositiveInt),
  hidden_act: v.optional(v.literal("silu"), "silu"),
  rms_norm_eps: v.optional(v.number(), 1e-6),
  rope_theta: v.optional(v.number()),
  rope_scaling: v.optional(v.nullable(RopeSchema)),
  rope_parameters: v.optional(v.nullable(RopeSchema)),
  attention_bias: v.optional(v.boolean(), false),
  tie_word_embeddings: v.optional(v.boolean()),
  max_position_embeddings: v.optional(PositiveInt, 128000),
  eos_token_id: v.optional(v.union([Index, v.array(Index)])),
});

const VisionSchema = v.looseObject({
  depth: PositiveInt,
  hidden_size: PositiveInt,
  hidden_act: v.optional(v.literal("gelu_pytorch_tanh"), "gelu_pytorch_tanh"),
  intermediate_size: PositiveInt,
  num_heads: PositiveInt,
  in_channels: v.optional(PositiveInt, 3),
  patch_size: v.optional(PositiveInt, 16),
  spatial_merge_size: v.optional(PositiveInt, 2),
  temporal_patch_size: v.optional(PositiveInt, 2),
  out_hidden_size: PositiveInt,
  num_position_embeddings: PositiveInt,
  deepstack_visual_indexes: v.optional(v.array(Index), [8, 16, 24]),
  rope_parameters: v.optional(v.nullable(RopeSchema)),
});

export const Qwen3VLConfigFileSchema = v.looseObject({
  model_type: v.optional(v.picklist(["qwen3_vl"])),
  text_config: v.looseObject({}),
  vision_config: VisionSchema,
  image_token_id: v.optional(Index, 151655),
  video_token_id: v.optional(Index, 151656),
  vision_start_token_id: v.optional(Index, 151652),
  vision_end_token_id: v.optional(Index, 151653),
  tie_word_embeddings: v.optional(v.boolean()),
  eos_token_id: v.optional(v.union([Index, v.array(Index)])),
});

export interface Qwen3VLTextConfig {
  vocabSize: number;
  hiddenSize: number;
  intermediateSize: number;
  numLayers: number;
  numHeads: number;
  numKvHeads: number;
  headDim: number;
  rmsNormEps: number;
  ropeTheta: number;
  /** Rotary frequency pairs of the temporal, height and width axes (sum headDim / 2). */
  mropeSection: [number, number, number];
  tieWordEmbeddings: boolean;
  maxPositions: number;
}

export interface Qwen3VLVisionConfig {
  depth: number;
  hiddenSize: number;
  intermediateSize: number;
  numHeads: number;
  headDim: number;
  inChannels: number;
  patchSize: number;
  spatialMergeSize: number;
  temporalPatchSize: number;
  outHiddenSize: number;
  /** Rows of the learned position table, a square grid of positionGridSide^2. */
  numPositionEmbeddings: number;
  positionGridSide: number;
  /** Vision blocks whose outputs feed the deepstack mergers, in merger order. */
  deepstackIndexes: number[];
  ropeTheta: number;
}

export interface Qwen3VLConfig {
  text: Qwen3VLTextConfig;
  vision: Qwen3VLVisionConfig;
  imageTokenId: number;
  videoTokenId: number;
  visionStartTokenId: number;
  visionEndTokenId: number;
  eosTokenIds: number[];
}

/** Read and normalise `dir/config.json`. */
export function loadQwen3VLConfig(dir: string): Qwen3VLConfig {
  const path = join(dir, "config.json");
  if (!existsSync(path)) throw new VagenError(`${path}: file not found`, "pass a Hugging Face model directory");
  return parseQwen3VLConfig(readJson(path), path);
}

export function parseQwen3VLConfig(raw: unknown, file = "config.json"): Qwen3VLConfig {
  const top = validate(Qwen3VLConfigFileSchema, raw, { file });
  const text = validate(TextSchema, top.text_config, { file: `${file} (text_config)` });
  const rope = text.rope_parameters ?? text.rope_scaling ?? undefined;
  const headDim = text.head_dim ?? text.hidden_size / text.num_attention_heads;
  if (!Number.isInteger(headDim) || headDim % 2 !== 0) {
    throw new VagenError(`${file}: key "text_config.head_dim": expected an even integer, got ${headDim}`);
  }
  const section = rope?.mrope_section;
  if (!section || section.length !== 3) {
    throw new VagenError(
      `${file}: key "text_config.rope_parameters.mrope_section" (or "rope_scaling.mrope_section"): expected three integers, got ${JSON.stringify(section)}`,
    );
  }
  if (section[0]! + section[1]! + section[2]! !== headDim / 2) {
    throw new VagenError(`${file}: key "text_config.mrope_section": ${JSON.stringify(section)} must sum to head_dim / 2 = ${headDim / 2}`);
  }
  if (text.attention_bias) {
    throw new VagenError(`${file}: key "text_config.attention_bias": expected false, got true`, "Qwen3-VL checkpoints have no attention biases");
  }
  const ropeType = rope?.rope_type ?? rope?.type ?? "default";
  if (ropeType !== "default" && ropeType !== "mrope") {
    throw new VagenError(`${file}: key "text_config.rope_parameters.rope_type": expected "default", got ${JSON.stringify(ropeType)}`);
  }
  const vis = top.vision_config;
  const visionHeadDim = vis.hidden_size / vis.num_heads;
  if (!Number.isInteger(visionHeadDim) || visionHeadDim % 4 !== 0) {
    throw new VagenError(`${file}: key "vision_config.hidden_size": hidden_size / num_heads must be a multiple of 4, got ${visionHeadDim}`);
  }
  const side = Math.round(Math.sqrt(vis.num_position_embeddings));
  if (side * side !== vis.num_position_embeddings) {
    throw new VagenError(`${file}: key "vision_config.num_position_embeddings": expected a square number, got ${vis.num_position_embeddings}`);
  }
  const deepstack = vis.deepstack_visual_indexes;
  for (const i of deepstack) {
    if (i >= vis.depth) throw new VagenError(`${file}: key "vision_config.deepstack_visual_indexes": index ${i} is not a vision block (depth ${vis.depth})`);
  }
  if (deepstack.length > text.num_hidden_layers) {
    throw new VagenError(
      `${file}: key "vision_config.deepstack_visual_indexes": ${deepstack.length} deepstack levels but only ${text.num_hidden_layers} decoder layers to add them to`,
    );
  }
  const visionRopeType = vis.rope_parameters?.rope_type ?? "axial";
  if (visionRopeType !== "axial" && visionRopeType !== "default") {
    throw new VagenError(`${file}: key "vision_config.rope_parameters.rope_type": expected "axial", got ${JSON.stringify(visionRopeType)}`);
  }
  const eos = top.eos_token_id ?? text.eos_token_id;
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
      // transformers' Qwen3VLTextConfig default theta.
      ropeTheta: rope?.rope_theta ?? text.rope_theta ?? 500_000,
      mropeSection: [section[0]!, section[1]!, section[2]!],
      // The outer flag is the one transformers ties by.
      tieWordEmbeddings: top.tie_word_embeddings ?? text.tie_word_embeddings ?? false,
      maxPositions: text.max_position_embeddings,
    },
    vision: {
      depth: vis.depth,
      hiddenSize: vis.hidden_size,
      intermediateSize: vis.intermediate_size,
      numHeads: vis.num_heads,
      headDim: visionHeadDim,
      inChannels: vis.in_channels,
      patchSize: vis.patch_size,
      spatialMergeSize: vis.spatial_merge_size,
      temporalPatchSize: vis.temporal_patch_size,
      outHiddenSize: vis.out_hidden_size,
      numPositionEmbeddings: vis.num_position_embeddings,
      positionGridSide: side,
      deepstackIndexes: [...deepstack],
      ropeTheta: vis.rope_parameters?.rope_theta ?? 10_000,
    },
    imageTokenId: top.image_token_id,
    videoTokenId: top.video_token_id,
    visionStartTokenId: top.vision_start_token_id,
    visionEndTokenId: top.vision_end_token_id,
    eosTokenIds: eos === undefined ? [] : Array.isArray(eos) ? eos : [eos],
  };
}
