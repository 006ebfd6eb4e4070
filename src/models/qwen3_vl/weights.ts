/**
 * Qwen3-VL checkpoint names. transformers (4.57 and later, so every published Qwen3-VL
 * checkpoint) saves `model.language_model.*`, `model.visual.*` and `lm_head.weight`;
 * vagen's code and its own checkpoints use the shorter `model.*` (the shared decoder's
 * names) and `visual.*`, as for Qwen2.5-VL. Both load.
 */
import { decoderWeightShapes } from "../decoder.ts";
import { expectShape, requireWeight, type Weights } from "../weights.ts";
import type { Qwen3VLConfig } from "./config.ts";
import { qwen3VLDecoderConfig } from "./text.ts";

export function canonicalQwen3VLName(name: string): string | undefined {
  if (name.startsWith("model.language_model.")) return `model.${name.slice("model.language_model.".length)}`;
  if (name.startsWith("model.visual.")) return name.slice("model.".length);
  // Rotary inverse frequencies are recomputed, never loaded.
  if (name.endsWith("rotary_emb.inv_freq") || name.endsWith("rotary_pos_emb.inv_freq")) return undefined;
  return name;
}

/**
 * A decoder module's name in transformers' Qwen3VLForConditionalGeneration
 * (`model.language_model.layers.N...`): what PEFT calls it, so an exported adapter's keys
 * are the ones PEFT loads.
 */
export function qwen3VLPeftModuleName(path: string): string {
  return path.startsWith("model.layers.") ? `model.language_model.${path.slice("model.".length)}` : path;
}

/**
 * A weight's name as transformers saves Qwen3VLForConditionalGeneration (the inverse of
 * `canonicalQwen3VLName`): what `vagen export` writes, since transformers maps no older
 * names onto this class's language model.
 */
export function qwen3VLCheckpointName(name: string): string {
  if (name.startsWith("model.")) return `model.language_model.${name.slice("model.".length)}`;
  if (name.startsWith("visual.")) return `model.${name}`;
  return name;
}

/** The vision tower, its merger and the deepstack mergers: every `visual.*` weight. */
export function isQwen3VLVisionWeight(name: string): boolean {
  return name.startsWith("visual.");
}

/** A LayerNorm + Linear-GELU-Linear merger's names and shapes. */
function mergerShapes(prefix: string, normWidth: number, width: number, out: number): [string, number[]][] {
  return [
    [`${prefix}.norm.weight`, [normWidth]],
    [`${prefix}.norm.bias`, [normWidth]],
    [`${prefix}.linear_fc1.weight`, [width, width]],
    [`${prefix}.linear_fc1.bias`, [width]],
    [`${prefix}.linear_fc2.weight`, [out, width]],
    [`${prefix}.linear_fc2.bias`, [out]],
  ];
}

/** Check that every tensor the config needs is present with the right shape. */
export function checkQwen3VLWeights(weights: Weights, config: Qwen3VLConfig, where: string): void {
  const v = config.vision;
  const h = v.hiddenSize;
  const merged = h * v.spatialMergeSize ** 2;
  const shapes: [string, number[]][] = [
    ...decoderWeightShapes(qwen3VLDecoderConfig(config.text)),
    ["visual.patch_embed.proj.weight", [h, v.inChannels, v.temporalPatchSize, v.patchSize, v.patchSize]],
    ["visual.patch_embed.proj.bias", [h]],
    ["visual.pos_embed.weight", [v.numPositionEmbeddings, h]],
    ...mergerShapes("visual.merger", h, merged, v.outHiddenSize),
  ];
  v.deepstackIndexes.forEach((_, j) => shapes.push(...mergerShapes(`visual.deepstack_merger_list.${j}`, merged, merged, v.outHiddenSize)));
  for (let i = 0; i < v.depth; i++) {
    const p = `visual.blocks.${i}`;
    shapes.push(
      [`${p}.norm1.weight`, [h]],
      [`${p}.norm1.bias`, [h]],
      [`${p}.norm2.weight`, [h]],
      [`${p}.norm2.bias`, [h]],
      [`${p}.attn.qkv.weight`, [3 * h, h]],
      [`${p}.attn.qkv.bias`, [3 * h]],
      [`${p}.attn.proj.weight`, [h, h]],
      [`${p}.attn.proj.bias`, [h]],
      [`${p}.mlp.linear_fc1.weight`, [v.intermediateSize, h]],
      [`${p}.mlp.linear_fc1.bias`, [v.intermediateSize]],
      [`${p}.mlp.linear_fc2.weight`, [h, v.intermediateSize]],
      [`${p}.mlp.linear_fc2.bias`, [h]],
    );
  }
  for (const [name, shape] of shapes) expectShape(requireWeight(weights, name, where), shape, name, where);
}
