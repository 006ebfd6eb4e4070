/**
 * InternVL's config.json in transformers' Hugging Face format (model_type "internvl",
 * InternVLForConditionalGeneration; OpenGVLab's InternVL3.5-*-HF checkpoints): a Qwen3
 * decoder under `text_config` (read by Qwen3's own parser, so its rope and bias rules hold),
 * the InternViT encoder under `vision_config` (square tiles of `image_size`, patches of
 * `patch_size`, a CLS token and absolute position embeddings, LayerNorm, layer scales),
 * and the pixel shuffle and projector settings at the top. Validated with valibot and
 * normalised into one typed `InternVLConfig`; what vagen does not run is refused by file
 * and key: the InternViT-6B settings (RMSNorm, q/k norm), other language models (Qwen2,
 * Qwen3-MoE, GPT-OSS), features from a layer other than the last, and a kept CLS feature.
 *
 * The head is tied by the top-level `tie_word_embeddings`, default true, as transformers'
 * InternVLConfig ties it.
 */
import * as v from "valibot";
import { existsSync } from "node:fs";
import { join } from "node:path";
import { validate } from "../../config/index.ts";
import { VagenError } from "../../core/errors.ts";
import type { DecoderConfig } from "../decoder.ts";
import { readJson } from "../tokenizer.ts";
import { parseQwen3Config } from "../qwen3/config.ts";

const PositiveInt = v.pipe(v.number(), v.integer(), v.minValue(1));
const TokenId = v.pipe(v.number(), v.integer(), v.minValue(0));
/** An int or a [height, width] pair, as transformers accepts image_size and patch_size. */
const SizePair = v.union([PositiveInt, v.tuple([PositiveInt, PositiveInt])]);

const VisionSchema = v.looseObject({
  hidden_size: v.optional(PositiveInt, 1024),
  num_hidden_layers: v.optional(PositiveInt, 24),
  num_attention_heads: v.optional(PositiveInt, 16),
  intermediate_size: v.optional(PositiveInt, 4096),
  hidden_act: v.optional(v.literal("gelu"), "gelu"),
  attention_bias: v.optional(v.boolean(), false),
  use_qk_norm: v.optional(v.boolean(), false),
  norm_type: v.optional(v.string(), "layer_norm"),
  layer_norm_eps: v.optional(v.number(), 1e-6),
  image_size: v.optional(SizePair, 448),
  patch_size: v.optional(SizePair, 14),
  num_channels: v.optional(PositiveInt, 3),
  use_absolute_position_embeddings: v.optional(v.boolean(), true),
  use_mean_pooling: v.optional(v.boolean(), true),
});

export const InternVLConfigFileSchema = v.looseObject({
  model_type: v.optional(v.literal("internvl")),
  text_config: v.looseObject({ model_type: v.optional(v.string(), "qwen2") }),
  vision_config: v.optional(VisionSchema, {}),
  image_token_id: v.optional(TokenId, 151667),
  image_seq_length: v.optional(PositiveInt, 256),
  downsample_ratio: v.optional(v.number(), 0.5),
  projector_hidden_act: v.optional(v.literal("gelu"), "gelu"),
  vision_feature_layer: v.optional(v.union([v.number(), v.array(v.number())]), -1),
  vision_feature_select_strategy: v.optional(v.string(), "default"),
  tie_word_embeddings: v.optional(v.boolean(), true),
  eos_token_id: v.optional(v.nullable(v.union([TokenId, v.array(TokenId)]))),
});

export interface InternVLVisionConfig {
  hiddenSize: number;
  numLayers: number;
  numHeads: number;
  headDim: number;
  intermediateSize: number;
  /** q/k/v projections carry biases (InternViT-300M). */
  attentionBias: boolean;
  layerNormEps: number;
  numChannels: number;
  /** Side of a square tile in pixels (vision_config.image_size). */
  imageSize: number;
  patchSize: number;
  /** Patches per tile side: imageSize / patchSize. */
  gridSide: number;
}

export interface InternVLConfig {
  text: DecoderConfig;
  maxPositions: number;
  vision: InternVLVisionConfig;
  imageTokenId: number;
  /** Patches merged into one token per side by the pixel shuffle: 1 / downsample_ratio. */
  shuffle: number;
  /** Language-model tokens one tile becomes: (gridSide / shuffle)^2. */
  tokensPerTile: number;
  eosTokenIds: number[];
}

/** Read and normalise `dir/config.json`. */
export function loadInternVLConfig(dir: string): InternVLConfig {
  const path = join(dir, "config.json");
  if (!existsSync(path)) throw new VagenError(`${path}: file not found`, "pass a Hugging Face model directory");
  return parseInternVLConfig(readJson(path), path);
}

function square(value: number | readonly [number, number], file: string, key: string): number {
  if (typeof value === "number") return value;
  if (value[0] !== value[1]) throw new VagenError(`${file}: key "${key}": got ${JSON.stringify(value)}, expected a square size (InternVL tiles are square)`);
  return value[0];
}

export function parseInternVLConfig(raw: unknown, file = "config.json"): InternVLConfig {
  const top = validate(InternVLConfigFileSchema, raw, { file });
  const textType = top.text_config.model_type;
  if (textType !== "qwen3") {
    throw new VagenError(
      `${file}: key "text_config.model_type": got ${JSON.stringify(textType)}, expected "qwen3"`,
      "vagen runs InternVL3.5's dense Qwen3 language model; InternVL3 (Qwen2), the MoE and GPT-OSS variants are not implemented",
    );
  }
  const qwen3 = parseQwen3Config(top.text_config, `${file} (text_config)`);
  const vis = top.vision_config;
  const refuse = (key: string, got: unknown, expected: string, why: string) => {
    throw new VagenError(`${file}: key "${key}": got ${JSON.stringify(got)}, expected ${expected}`, why);
  };
  if (vis.norm_type !== "layer_norm") refuse("vision_config.norm_type", vis.norm_type, '"layer_norm"', "the InternViT-6B encoder (rms_norm) is not implemented");
  if (vis.use_qk_norm) refuse("vision_config.use_qk_norm", true, "false", "the InternViT-6B encoder (q/k norm) is not implemented");
  if (!vis.use_absolute_position_embeddings) refuse("vision_config.use_absolute_position_embeddings", false, "true", "InternViT adds learned absolute position embeddings");
  if (!vis.use_mean_pooling) refuse("vision_config.use_mean_pooling", false, "true", "InternVL checkpoints end the encoder without a final LayerNorm");
  if (top.vision_feature_layer !== -1) refuse("vision_feature_layer", top.vision_feature_layer, "-1", "vagen takes the image features from the encoder's last layer");
  if (top.vision_feature_select_strategy !== "default") {
    refuse("vision_feature_select_strategy", top.vision_feature_select_strategy, '"default"', "the CLS feature is dropped before the pixel shuffle");
  }
  const imageSize = square(vis.image_size, file, "vision_config.image_size");
  const patchSize = square(vis.patch_size, file, "vision_config.patch_size");
  if (imageSize % patchSize !== 0) refuse("vision_config.image_size", imageSize, `a multiple of patch_size ${patchSize}`, "a tile is a whole grid of patches");
  const gridSide = imageSize / patchSize;
  const shuffle = 1 / top.downsample_ratio;
  if (!Number.isInteger(shuffle) || gridSide % shuffle !== 0) {
    refuse("downsample_ratio", top.downsample_ratio, `1 / n for an n dividing the ${gridSide} patches of a tile side`, "the pixel shuffle merges n x n patches into one token");
  }
  const headDim = vis.hidden_size / vis.num_attention_heads;
  if (!Number.isInteger(headDim)) refuse("vision_config.num_attention_heads", vis.num_attention_heads, `a divisor of hidden_size ${vis.hidden_size}`, "every head has the same width");
  const tokensPerTile = (gridSide / shuffle) ** 2;
  if (top.image_seq_length !== tokensPerTile) {
    refuse("image_seq_length", top.image_seq_length, `${tokensPerTile} ((image_size / patch_size * downsample_ratio)^2)`, "each tile's placeholder count is its pixel-shuffled patch count");
  }
  const eos = top.eos_token_id ?? undefined;
  return {
    text: { ...qwen3.decoder, tieWordEmbeddings: top.tie_word_embeddings },
    maxPositions: qwen3.maxPositions,
    vision: {
      hiddenSize: vis.hidden_size,
      numLayers: vis.num_hidden_layers,
      numHeads: vis.num_attention_heads,
      headDim,
      intermediateSize: vis.intermediate_size,
      attentionBias: vis.attention_bias,
      layerNormEps: vis.layer_norm_eps,
      numChannels: vis.num_channels,
      imageSize,
      patchSize,
      gridSide,
    },
    imageTokenId: top.image_token_id,
    shuffle,
    tokensPerTile,
    eosTokenIds: [...(eos === undefined ? [] : Array.isArray(eos) ? eos : [eos]), ...qwen3.eosTokenIds],
  };
}

/** preprocessor_config.json of a GotOcr2 image processor (the keys InternVL's tiling reads). */
export const InternVLPreprocessorSchema = v.looseObject({
  size: v.optional(v.looseObject({ height: PositiveInt, width: PositiveInt })),
  min_patches: v.optional(PositiveInt, 1),
  max_patches: v.optional(PositiveInt, 12),
  image_mean: v.optional(v.tuple([v.number(), v.number(), v.number()]), [0.48145466, 0.4578275, 0.40821073]),
  image_std: v.optional(v.tuple([v.number(), v.number(), v.number()]), [0.26862954, 0.26130258, 0.27577711]),
  rescale_factor: v.optional(v.number(), 1 / 255),
  do_resize: v.optional(v.literal(true), true),
  do_rescale: v.optional(v.literal(true), true),
  do_normalize: v.optional(v.literal(true), true),
  resample: v.optional(v.literal(3), 3),
});

/** How InternVL cuts an image into tiles and normalises them. */
export interface TilingOptions {
  /** Side of a square tile in pixels. */
  tileSize: number;
  minTiles: number;
  maxTiles: number;
  mean: readonly number[];
  std: readonly number[];
  rescaleFactor: number;
}

/**
 * The tiling options of `dir` (preprocessor_config.json; without it, InternVL3.5's: 448
 * tiles, 1 to 12 of them, ImageNet mean and std), checked against the vision tower's tile
 * size and processor_config.json's image_seq_length.
 */
export function loadTilingOptions(dir: string, config: InternVLConfig): TilingOptions {
  const path = join(dir, "preprocessor_config.json");
  const tileSize = config.vision.imageSize;
  let options: TilingOptions = { tileSize, minTiles: 1, maxTiles: 12, mean: [0.485, 0.456, 0.406], std: [0.229, 0.224, 0.225], rescaleFactor: 1 / 255 };
  if (existsSync(path)) {
    const pp = validate(InternVLPreprocessorSchema, readJson(path), { file: path });
    const size = pp.size ?? { height: tileSize, width: tileSize };
    if (size.height !== tileSize || size.width !== tileSize) {
      throw new VagenError(
        `${path}: key "size": got ${JSON.stringify({ height: size.height, width: size.width })}, expected {"height": ${tileSize}, "width": ${tileSize}} (config.json's vision_config.image_size)`,
        "tiles of another size would need the position embeddings resampled, which vagen does not do",
      );
    }
    if (pp.min_patches > pp.max_patches) throw new VagenError(`${path}: key "min_patches": got ${pp.min_patches}, expected at most max_patches ${pp.max_patches}`);
    options = { tileSize, minTiles: pp.min_patches, maxTiles: pp.max_patches, mean: pp.image_mean, std: pp.image_std, rescaleFactor: pp.rescale_factor };
  }
  const procPath = join(dir, "processor_config.json");
  if (existsSync(procPath)) {
    const seq = readJson(procPath).image_seq_length;
    if (seq !== undefined && seq !== config.tokensPerTile) {
      throw new VagenError(`${procPath}: key "image_seq_length": got ${JSON.stringify(seq)}, expected ${config.tokensPerTile} (config.json's image_seq_length)`);
    }
  }
  return options;
}
