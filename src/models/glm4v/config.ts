/**
 * GLM-4.1V / GLM-4.6V-Flash's config.json (transformers' Glm4vConfig, model_type glm4v):
 * the language model's keys under `text_config` (GLM-4 decoder layers: q/k/v biases,
 * fused gate_up_proj, sandwich norms; head_dim = hidden_size / num_attention_heads; a
 * partial rotation, `partial_rotary_factor` of each head, on adjacent pairs, with 3-axis
 * `mrope_section` blocks), in transformers 4.5x's layout (`rope_theta`,
 * `partial_rotary_factor` beside `rope_scaling`) or 5.x's (all in `rope_parameters`); the
 * vision tower's under `vision_config` (patch 14, a learned position grid of
 * (image_size / patch_size)^2, RMSNorm blocks, the downsample conv to out_hidden_size).
 * Validated with valibot, normalised into one typed `Glm4vConfig`; what vagen does not run
 * is refused by file and key.
 */
import * as v from "valibot";
import { existsSync } from "node:fs";
import { join } from "node:path";
import { validate } from "../../config/index.ts";
import { VagenError } from "../../core/errors.ts";
import { readJson } from "../tokenizer.ts";

const PositiveInt = v.pipe(v.number(), v.integer(), v.minValue(1));
const Index = v.pipe(v.number(), v.integer(), v.minValue(0));
const Fraction = v.pipe(v.number(), v.gtValue(0), v.maxValue(1));

const RopeSchema = v.looseObject({
  rope_theta: v.optional(v.number()),
  mrope_section: v.optional(v.array(Index)),
  partial_rotary_factor: v.optional(Fraction),
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
  hidden_act: v.optional(v.literal("silu"), "silu"),
  rms_norm_eps: v.optional(v.number(), 1e-5),
  rope_theta: v.optional(v.number()),
  partial_rotary_factor: v.optional(Fraction),
  rope_scaling: v.optional(v.nullable(RopeSchema)),
  rope_parameters: v.optional(v.nullable(RopeSchema)),
  attention_bias: v.optional(v.literal(true), true),
  tie_word_embeddings: v.optional(v.boolean()),
  max_position_embeddings: v.optional(PositiveInt, 32768),
  eos_token_id: v.optional(v.union([Index, v.array(Index)])),
});

const VisionSchema = v.looseObject({
  depth: PositiveInt,
  hidden_size: PositiveInt,
  hidden_act: v.optional(v.literal("silu"), "silu"),
  attention_bias: v.optional(v.boolean(), false),
  intermediate_size: PositiveInt,
  num_heads: PositiveInt,
  in_channels: v.optional(PositiveInt, 3),
  image_size: v.optional(PositiveInt, 336),
  patch_size: v.optional(PositiveInt, 14),
  rms_norm_eps: v.optional(v.number(), 1e-5),
  spatial_merge_size: v.optional(PositiveInt, 2),
  temporal_patch_size: v.optional(PositiveInt, 2),
  out_hidden_size: PositiveInt,
  rope_parameters: v.optional(v.nullable(RopeSchema)),
});

export const Glm4vConfigFileSchema = v.looseObject({
  model_type: v.optional(v.picklist(["glm4v"])),
  text_config: v.looseObject({}),
  vision_config: VisionSchema,
  image_token_id: v.optional(Index, 151343),
  video_token_id: v.optional(Index, 151344),
  image_start_token_id: v.optional(Index, 151339),
  image_end_token_id: v.optional(Index, 151340),
  video_start_token_id: v.optional(Index, 151341),
  video_end_token_id: v.optional(Index, 151342),
  tie_word_embeddings: v.optional(v.boolean()),
  eos_token_id: v.optional(v.union([Index, v.array(Index)])),
});

export interface Glm4vTextConfig {
  vocabSize: number;
  hiddenSize: number;
  intermediateSize: number;
  numLayers: number;
  numHeads: number;
  numKvHeads: number;
  headDim: number;
  /** Head dimensions the rotation covers: headDim * partial_rotary_factor. */
  rotaryDim: number;
  rmsNormEps: number;
  ropeTheta: number;
  /** Rotary frequency pairs of the temporal, height and width axes (sum rotaryDim / 2). */
  mropeSection: [number, number, number];
  tieWordEmbeddings: boolean;
  maxPositions: number;
}

export interface Glm4vVisionConfig {
  depth: number;
  hiddenSize: number;
  /** Width of the merger's gated MLP (the blocks' MLP is out_hidden_size wide). */
  intermediateSize: number;
  numHeads: number;
  headDim: number;
  attentionBias: boolean;
  inChannels: number;
  patchSize: number;
  /** Side of the learned square position grid: image_size / patch_size. */
  positionGridSide: number;
  rmsNormEps: number;
  spatialMergeSize: number;
  temporalPatchSize: number;
  outHiddenSize: number;
  ropeTheta: number;
}

export interface Glm4vConfig {
  text: Glm4vTextConfig;
  vision: Glm4vVisionConfig;
  imageTokenId: number;
  videoTokenId: number;
  imageStartTokenId: number;
  imageEndTokenId: number;
  eosTokenIds: number[];
}

/** Read and normalise `dir/config.json`. */
export function loadGlm4vConfig(dir: string): Glm4vConfig {
  const path = join(dir, "config.json");
  if (!existsSync(path)) throw new VagenError(`${path}: file not found`, "pass a Hugging Face model directory");
  return parseGlm4vConfig(readJson(path), path);
}

export function parseGlm4vConfig(raw: unknown, file = "config.json"): Glm4vConfig {
  const top = validate(Glm4vConfigFileSchema, raw, { file });
  const text = validate(TextSchema, top.text_config, { file: `${file} (text_config)` });
  // transformers 5 writes rope_parameters; 4.5x wrote rope_scaling beside top-level keys.
  const rope = text.rope_parameters ?? text.rope_scaling ?? undefined;
  const headDim = text.hidden_size / text.num_attention_heads;
  if (!Number.isInteger(headDim) || headDim % 2 !== 0) {
    throw new VagenError(`${file}: key "text_config.hidden_size": hidden_size / num_attention_heads must be an even integer, got ${headDim}`);
  }
  // GLM-4.1V's published factor, and transformers 4.5x's default.
  const factor = rope?.partial_rotary_factor ?? text.partial_rotary_factor ?? 0.5;
  const rotaryDim = Math.trunc(headDim * factor);
  if (rotaryDim % 2 !== 0 || rotaryDim === 0) {
    throw new VagenError(`${file}: key "text_config.rope_parameters.partial_rotary_factor": ${factor} of head_dim ${headDim} is ${rotaryDim} dimensions, expected an even number > 0`);
  }
  const section = rope?.mrope_section;
  if (!section || section.length !== 3) {
    throw new VagenError(
      `${file}: key "text_config.rope_parameters.mrope_section" (or "rope_scaling.mrope_section"): expected three integers, got ${JSON.stringify(section)}`,
    );
  }
  if (section[0]! + section[1]! + section[2]! !== rotaryDim / 2) {
    throw new VagenError(
      `${file}: key "text_config.rope_parameters.mrope_section": ${JSON.stringify(section)} must sum to head_dim * partial_rotary_factor / 2 = ${rotaryDim / 2}`,
    );
  }
  const ropeType = rope?.rope_type ?? rope?.type ?? "default";
  if (ropeType !== "default" && ropeType !== "mrope") {
    throw new VagenError(`${file}: key "text_config.rope_parameters.rope_type": expected "default", got ${JSON.stringify(ropeType)}`);
  }
  const vis = top.vision_config;
  if (vis.out_hidden_size !== text.hidden_size) {
    throw new VagenError(`${file}: key "vision_config.out_hidden_size": expected text_config.hidden_size (${text.hidden_size}), got ${vis.out_hidden_size}`);
  }
  const visionHeadDim = vis.hidden_size / vis.num_heads;
  if (!Number.isInteger(visionHeadDim) || visionHeadDim % 4 !== 0) {
    throw new VagenError(`${file}: key "vision_config.hidden_size": hidden_size / num_heads must be a multiple of 4, got ${visionHeadDim}`);
  }
  if (vis.image_size % vis.patch_size !== 0) {
    throw new VagenError(`${file}: key "vision_config.image_size": expected a multiple of patch_size ${vis.patch_size}, got ${vis.image_size}`);
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
      rotaryDim,
      rmsNormEps: text.rms_norm_eps,
      ropeTheta: rope?.rope_theta ?? text.rope_theta ?? 10_000,
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
      attentionBias: vis.attention_bias,
      inChannels: vis.in_channels,
      patchSize: vis.patch_size,
      positionGridSide: vis.image_size / vis.patch_size,
      rmsNormEps: vis.rms_norm_eps,
      spatialMergeSize: vis.spatial_merge_size,
      temporalPatchSize: vis.temporal_patch_size,
      outHiddenSize: vis.out_hidden_size,
      ropeTheta: vis.rope_parameters?.rope_theta ?? 10_000,
    },
    imageTokenId: top.image_token_id,
    videoTokenId: top.video_token_id,
    imageStartTokenId: top.image_start_token_id,
    imageEndTokenId: top.image_end_token_id,
    eosTokenIds: eos === undefined ? [] : Array.isArray(eos) ? eos : [eos],
  };
}
