/**
 * GLM-4V checkpoint names. transformers saves Glm4vForConditionalGeneration as
 * `model.language_model.*`, `model.visual.*` and `lm_head.weight`; vagen's code and its own
 * checkpoints use the shorter `model.*` (the shared decoder's names) and `visual.*`, as for
 * the Qwen VL families. Both load; `vagen export` writes transformers' names.
 */
import { decoderWeightShapes } from "../decoder.ts";
import { expectShape, requireWeight, type Weights } from "../weights.ts";
import type { Glm4vConfig } from "./config.ts";
import { glm4vDecoderConfig } from "./text.ts";

export function canonicalGlm4vName(name: string): string | undefined {
  if (name.startsWith("model.language_model.")) return `model.${name.slice("model.language_model.".length)}`;
  if (name.startsWith("model.visual.")) return name.slice("model.".length);
  // Rotary inverse frequencies are recomputed, never loaded.
  if (name.endsWith("rotary_emb.inv_freq") || name.endsWith("rotary_pos_emb.inv_freq")) return undefined;
  return name;
}

/** A decoder module's name in transformers' class (`model.language_model.layers.N...`): what PEFT calls it. */
export function glm4vPeftModuleName(path: string): string {
  return path.startsWith("model.layers.") ? `model.language_model.${path.slice("model.".length)}` : path;
}

/** A weight's name as transformers saves Glm4vForConditionalGeneration (the inverse of `canonicalGlm4vName`). */
export function glm4vCheckpointName(name: string): string {
  if (name.startsWith("model.")) return `model.language_model.${name.slice("model.".length)}`;
  if (name.startsWith("visual.")) return `model.${name}`;
  return name;
}

/** The vision tower, its downsample conv and merger: every `visual.*` weight. */
export function isGlm4vVisionWeight(name: string): boolean {
  return name.startsWith("visual.");
}

/** Check that every tensor the config needs is present with the right shape. */
export function checkGlm4vWeights(weights: Weights, config: Glm4vConfig, where: string): void {
  const v = config.vision;
  const h = v.hiddenSize;
  const out = v.outHiddenSize;
  const m = v.spatialMergeSize;
  const shapes: [string, number[]][] = [
    ...decoderWeightShapes(glm4vDecoderConfig(config.text)),
    ["visual.patch_embed.proj.weight", [h, v.inChannels, v.temporalPatchSize, v.patchSize, v.patchSize]],
    ["visual.patch_embed.proj.bias", [h]],
    ["visual.post_conv_layernorm.weight", [h]],
    ["visual.embeddings.position_embedding.weight", [v.positionGridSide ** 2, h]],
    ["visual.post_layernorm.weight", [h]],
    ["visual.downsample.weight", [out, h, m, m]],
    ["visual.downsample.bias", [out]],
    ["visual.merger.proj.weight", [out, out]],
    ["visual.merger.post_projection_norm.weight", [out]],
    ["visual.merger.post_projection_norm.bias", [out]],
    ["visual.merger.gate_proj.weight", [v.intermediateSize, out]],
    ["visual.merger.up_proj.weight", [v.intermediateSize, out]],
    ["visual.merger.down_proj.weight", [out, v.intermediateSize]],
  ];
  for (let i = 0; i < v.depth; i++) {
    const p = `visual.blocks.${i}`;
    shapes.push(
      [`${p}.norm1.weight`, [h]],
      [`${p}.norm2.weight`, [h]],
      [`${p}.attn.qkv.weight`, [3 * h, h]],
      [`${p}.attn.proj.weight`, [h, h]],
      // The blocks' gated MLP is out_hidden_size wide (transformers' Glm4VisionMlp).
      [`${p}.mlp.gate_proj.weight`, [out, h]],
      [`${p}.mlp.up_proj.weight`, [out, h]],
      [`${p}.mlp.down_proj.weight`, [h, out]],
    );
    if (v.attentionBias) shapes.push([`${p}.attn.qkv.bias`, [3 * h]]);
  }
  for (const [name, shape] of shapes) expectShape(requireWeight(weights, name, where), shape, name, where);
}
