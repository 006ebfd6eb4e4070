/**
 * A small Qwen2.5-VL, made in-process: the published architecture (vision tower with
 * window and full attention blocks, patch merger, M-RoPE decoder, separate LM head) at a
 * few million parameters, randomly initialised from a fixed seed, written as an ordinary
 * Hugging Face model directory (config.json, model.safetensors, tokenizer.json,
 * tokenizer_config.json, chat_template.jinja, preprocessor_config.json,
 * generation_config.json) that `loadChatModel`, `loadEngine` and `vagen eval` accept.
 *
 * Initialisation follows transformers' `_init_weights` for Qwen2.5-VL: every linear and
 * embedding weight ~ N(0, initializer_range), biases zero, RMSNorm weights one.
 */
import { mkdirSync, renameSync, rmSync, writeFileSync } from "node:fs";
import { dirname, join } from "node:path";
import * as torch from "../torch/index.ts";
import type { Tensor } from "../torch/index.ts";
import { VagenError } from "../core/errors.ts";
import { QWEN25_VL_CHAT_TEMPLATE, type BpeTokenizer } from "./tokenizer.ts";

/** The sizes that make a Qwen2.5-VL small or large. */
export interface TinyQwenSpec {
  textHidden: number;
  textLayers: number;
  textHeads: number;
  textKvHeads: number;
  textIntermediate: number;
  visionHidden: number;
  visionDepth: number;
  visionHeads: number;
  visionIntermediate: number;
  /** Largest image area the processor keeps (pixels); observations are resized to fit. The demo sets it from its task. */
  maxPixels: number;
  /** Smallest image area the processor keeps (unset: 56 x 56); smaller renders are scaled up. */
  minPixels?: number;
  /**
   * Base of the decoder's rotary frequencies. Qwen's 10^6 is for 128-dim heads over long
   * contexts; with small heads the height and width sections of M-RoPE would then turn by
   * a few thousandths of a radian per board cell, leaving attention blind to where a cell
   * is. A small base gives those sections whole fractions of a radian per cell; the demo's
   * base of 1 turns every frequency by one radian per cell, so a cell's neighbours (1
   * radian away) and the cells two or three over (2 and 3 radians) are far apart for
   * attention (docs/demo.md measures 1 against 10, 3, 2 and 0.3).
   */
  ropeTheta: number;
  initializerRange: number;
}

/**
 * The demo's base spec (the recipes narrow the decoder and size the images for their
 * boards): about 1.6M parameters, a 4x4 FrozenLake board resized to 112 x 112 so each
 * board cell is exactly one merged image token (2 x 2 patches of 14 px).
 */
export const DEMO_MODEL_SPEC: TinyQwenSpec = {
  textHidden: 128,
  textLayers: 4,
  textHeads: 4,
  textKvHeads: 2,
  textIntermediate: 384,
  visionHidden: 64,
  visionDepth: 2,
  visionHeads: 2,
  visionIntermediate: 128,
  maxPixels: oneTokenPerCell(4),
  ropeTheta: 1,
  initializerRange: 0.02,
};

/**
 * The image processor's pixel budget that makes a `size` x `size` board's render exactly
 * `size` x `size` merged image tokens, one per cell (28 px a cell: 2 x 2 patches of 14):
 * smart_resize floors each side to a multiple of 28 under the budget, so one pixel of
 * headroom per side keeps the floor on 28 * size.
 */
export function oneTokenPerCell(size: number): number {
  return (28 * size + 1) ** 2;
}

/** M-RoPE section (temporal, height, width frequency pairs) for a head dim, in Qwen's 1:1.5:1.5 split. */
export function mropeSection(headDim: number): [number, number, number] {
  const pairs = headDim / 2;
  const temporal = Math.round(pairs / 4);
  const height = Math.floor((pairs - temporal) / 2);
  return [temporal, height, pairs - temporal - height];
}

/** config.json for `spec` over `tokenizer`'s vocabulary. */
export function tinyQwenConfig(spec: TinyQwenSpec, tokenizer: BpeTokenizer): Record<string, unknown> {
  const headDim = spec.textHidden / spec.textHeads;
  if (!Number.isInteger(headDim) || headDim % 2 !== 0) {
    throw new VagenError(`model spec: textHidden ${spec.textHidden} / textHeads ${spec.textHeads} must be an even integer head dim`);
  }
  if (spec.visionHidden % spec.visionHeads !== 0) {
    throw new VagenError(`model spec: visionHidden ${spec.visionHidden} is not divisible by visionHeads ${spec.visionHeads}`);
  }
  const ids = tokenizer.specialIds;
  return {
    architectures: ["Qwen2_5_VLForConditionalGeneration"],
    model_type: "qwen2_5_vl",
    dtype: "float32",
    image_token_id: ids["<|image_pad|>"],
    video_token_id: ids["<|video_pad|>"],
    vision_start_token_id: ids["<|vision_start|>"],
    vision_end_token_id: ids["<|vision_end|>"],
    vision_token_id: ids["<|vision_pad|>"],
    tie_word_embeddings: false,
    text_config: {
      model_type: "qwen2_5_vl_text",
      vocab_size: tokenizer.vocabSize,
      hidden_size: spec.textHidden,
      intermediate_size: spec.textIntermediate,
      num_hidden_layers: spec.textLayers,
      num_attention_heads: spec.textHeads,
      num_key_value_heads: spec.textKvHeads,
      hidden_act: "silu",
      rms_norm_eps: 1e-6,
      max_position_embeddings: 8192,
      initializer_range: spec.initializerRange,
      bos_token_id: ids["<|endoftext|>"],
      eos_token_id: ids["<|im_end|>"],
      tie_word_embeddings: false,
      use_sliding_window: false,
      rope_parameters: { rope_type: "default", type: "mrope", rope_theta: spec.ropeTheta, mrope_section: mropeSection(headDim) },
    },
    vision_config: {
      model_type: "qwen2_5_vl_vision",
      depth: spec.visionDepth,
      hidden_size: spec.visionHidden,
      intermediate_size: spec.visionIntermediate,
      num_heads: spec.visionHeads,
      out_hidden_size: spec.textHidden,
      in_channels: 3,
      patch_size: 14,
      spatial_merge_size: 2,
      temporal_patch_size: 2,
      tokens_per_second: 2,
      window_size: 112,
      // The last block attends over the whole image, the others within windows, as in the published models.
      fullatt_block_indexes: [spec.visionDepth - 1],
      hidden_act: "silu",
      initializer_range: spec.initializerRange,
    },
  };
}

/** Every tensor of the checkpoint with its shape and how it starts. */
function parameterShapes(spec: TinyQwenSpec, vocabSize: number): { name: string; shape: number[]; init: "normal" | "zeros" | "ones" }[] {
  const h = spec.textHidden;
  const kv = spec.textKvHeads * (h / spec.textHeads);
  const vh = spec.visionHidden;
  const merged = vh * 4; // spatial_merge_size 2: four patches per merged token
  const out: { name: string; shape: number[]; init: "normal" | "zeros" | "ones" }[] = [
    { name: "model.embed_tokens.weight", shape: [vocabSize, h], init: "normal" },
    { name: "model.norm.weight", shape: [h], init: "ones" },
    { name: "lm_head.weight", shape: [vocabSize, h], init: "normal" },
    { name: "visual.patch_embed.proj.weight", shape: [vh, 3, 2, 14, 14], init: "normal" },
    { name: "visual.merger.ln_q.weight", shape: [vh], init: "ones" },
    { name: "visual.merger.mlp.0.weight", shape: [merged, merged], init: "normal" },
    { name: "visual.merger.mlp.0.bias", shape: [merged], init: "zeros" },
    { name: "visual.merger.mlp.2.weight", shape: [h, merged], init: "normal" },
    { name: "visual.merger.mlp.2.bias", shape: [h], init: "zeros" },
  ];
  for (let i = 0; i < spec.textLayers; i++) {
    const p = `model.layers.${i}`;
    out.push(
      { name: `${p}.self_attn.q_proj.weight`, shape: [h, h], init: "normal" },
      { name: `${p}.self_attn.q_proj.bias`, shape: [h], init: "zeros" },
      { name: `${p}.self_attn.k_proj.weight`, shape: [kv, h], init: "normal" },
      { name: `${p}.self_attn.k_proj.bias`, shape: [kv], init: "zeros" },
      { name: `${p}.self_attn.v_proj.weight`, shape: [kv, h], init: "normal" },
      { name: `${p}.self_attn.v_proj.bias`, shape: [kv], init: "zeros" },
      { name: `${p}.self_attn.o_proj.weight`, shape: [h, h], init: "normal" },
      { name: `${p}.mlp.gate_proj.weight`, shape: [spec.textIntermediate, h], init: "normal" },
      { name: `${p}.mlp.up_proj.weight`, shape: [spec.textIntermediate, h], init: "normal" },
      { name: `${p}.mlp.down_proj.weight`, shape: [h, spec.textIntermediate], init: "normal" },
      { name: `${p}.input_layernorm.weight`, shape: [h], init: "ones" },
      { name: `${p}.post_attention_layernorm.weight`, shape: [h], init: "ones" },
    );
  }
  for (let i = 0; i < spec.visionDepth; i++) {
    const p = `visual.blocks.${i}`;
    out.push(
      { name: `${p}.norm1.weight`, shape: [vh], init: "ones" },
      { name: `${p}.norm2.weight`, shape: [vh], init: "ones" },
      { name: `${p}.attn.qkv.weight`, shape: [3 * vh, vh], init: "normal" },
      { name: `${p}.attn.qkv.bias`, shape: [3 * vh], init: "zeros" },
      { name: `${p}.attn.proj.weight`, shape: [vh, vh], init: "normal" },
      { name: `${p}.attn.proj.bias`, shape: [vh], init: "zeros" },
      { name: `${p}.mlp.gate_proj.weight`, shape: [spec.visionIntermediate, vh], init: "normal" },
      { name: `${p}.mlp.gate_proj.bias`, shape: [spec.visionIntermediate], init: "zeros" },
      { name: `${p}.mlp.up_proj.weight`, shape: [spec.visionIntermediate, vh], init: "normal" },
      { name: `${p}.mlp.up_proj.bias`, shape: [spec.visionIntermediate], init: "zeros" },
      { name: `${p}.mlp.down_proj.weight`, shape: [vh, spec.visionIntermediate], init: "normal" },
      { name: `${p}.mlp.down_proj.bias`, shape: [vh], init: "zeros" },
    );
  }
  return out;
}

/** Number of parameters a model of `spec` has over a vocabulary of `vocabSize`. */
export function parameterCount(spec: TinyQwenSpec, vocabSize: number): number {
  return parameterShapes(spec, vocabSize).reduce((n, p) => n + p.shape.reduce((a, b) => a * b, 1), 0);
}

/** Random weights for `spec`, drawn from a generator seeded with `seed` (same seed, same bits). */
export function initTinyQwenWeights(spec: TinyQwenSpec, vocabSize: number, seed: number): Map<string, Tensor> {
  const generator = new torch.Generator({ seed });
  try {
    const weights = new Map<string, Tensor>();
    for (const { name, shape, init } of parameterShapes(spec, vocabSize)) {
      const t =
        init === "ones"
          ? torch.ones(shape)
          : init === "zeros"
            ? torch.zeros(shape)
            : torch.tidy(() => torch.randn(shape, { generator }).mul(spec.initializerRange));
      weights.set(name, torch.keep(t));
    }
    return weights;
  } finally {
    generator.dispose();
  }
}

/** preprocessor_config.json: Qwen2VLImageProcessor's defaults with the spec's pixel budget. */
export function preprocessorConfig(spec: TinyQwenSpec): Record<string, unknown> {
  return {
    image_processor_type: "Qwen2VLImageProcessor",
    do_convert_rgb: true,
    do_normalize: true,
    do_rescale: true,
    do_resize: true,
    image_mean: [0.48145466, 0.4578275, 0.40821073],
    image_std: [0.26862954, 0.26130258, 0.27577711],
    merge_size: 2,
    patch_size: 14,
    temporal_patch_size: 2,
    resample: 3,
    rescale_factor: 1 / 255,
    size: { shortest_edge: spec.minPixels ?? 56 * 56, longest_edge: spec.maxPixels },
  };
}

/**
 * Write a model directory: config, weights (`weights`, or a fresh random init from `seed`),
 * tokenizer, chat template and processor configs. Written to a temporary folder and renamed,
 * so a directory that exists is complete.
 */
export function writeTinyQwenModelDir(
  dir: string,
  spec: TinyQwenSpec,
  tokenizer: BpeTokenizer,
  opts: { seed: number; weights?: Map<string, Tensor> },
): void {
  const tmp = `${dir}.tmp-${process.pid}`;
  rmSync(tmp, { recursive: true, force: true });
  mkdirSync(tmp, { recursive: true });
  const weights = opts.weights ?? initTinyQwenWeights(spec, tokenizer.vocabSize, opts.seed);
  try {
    writeModelFiles(tmp, spec, tokenizer);
    torch.safetensors.save(join(tmp, "model.safetensors"), weights, { format: "pt" });
  } finally {
    if (!opts.weights) for (const t of weights.values()) t.dispose();
  }
  mkdirSync(dirname(dir), { recursive: true });
  rmSync(dir, { recursive: true, force: true });
  renameSync(tmp, dir);
}

/** Everything of a model directory but the weights. */
export function writeModelFiles(dir: string, spec: TinyQwenSpec, tokenizer: BpeTokenizer): void {
  const json = (value: unknown) => `${JSON.stringify(value, null, 2)}\n`;
  const ids = tokenizer.specialIds;
  writeFileSync(join(dir, "config.json"), json(tinyQwenConfig(spec, tokenizer)));
  writeFileSync(join(dir, "generation_config.json"), json({ bos_token_id: ids["<|endoftext|>"], eos_token_id: [ids["<|im_end|>"], ids["<|endoftext|>"]] }));
  writeFileSync(join(dir, "tokenizer.json"), json(tokenizer.tokenizer));
  writeFileSync(join(dir, "tokenizer_config.json"), json(tokenizer.config));
  writeFileSync(join(dir, "chat_template.jinja"), QWEN25_VL_CHAT_TEMPLATE);
  writeFileSync(join(dir, "preprocessor_config.json"), json(preprocessorConfig(spec)));
}
