/**
 * Qwen2.5-VL checkpoint names. transformers has saved them two ways: the published
 * layout (`model.layers.*`, `visual.*`, `lm_head.*`) and the 4.5x+ module layout
 * (`model.language_model.layers.*`, `model.visual.*`). Both map onto the published one,
 * which is what vagen's code and its checkpoints use.
 */
import type { Qwen25VLConfig } from "./config.ts";
import { decoderWeightShapes } from "../decoder.ts";
import { expectShape, requireWeight, type Weights } from "../weights.ts";
import { qwen25DecoderConfig } from "./text.ts";

export function canonicalQwen25VLName(name: string): string | undefined {
  if (name.startsWith("model.language_model.")) return `model.${name.slice("model.language_model.".length)}`;
  if (name.startsWith("model.visual.")) return name.slice("model.".length);
  // Rotary inverse frequencies are recomputed, never loaded.
  if (name.endsWith("rotary_emb.inv_freq") || name.endsWith("rotary_pos_emb.inv_freq")) return undefined;
  return name;
}

/**
 * A decoder module's name in transformers' current Qwen2.5-VL class (4.52 and later),
 * `model.language_model.layers.N...`: what PEFT calls it when it wraps that class, so an
 * exported adapter's keys are the ones PEFT loads (it does not apply the checkpoint
 * conversion of the published layout to adapter keys).
 */
export function qwen25VLPeftModuleName(path: string): string {
  return path.startsWith("model.layers.") ? `model.language_model.${path.slice("model.".length)}` : path;
}

/** Check that every tensor the config needs is present with the right shape. */
export function checkQwen25VLWeights(weights: Weights, config: Qwen25VLConfig, where: string): void {
  const v = config.vision;
  const shapes: [string, number[]][] = [
    ...decoderWeightShapes(qwen25DecoderConfig(config.text)),
    ["visual.patch_embed.proj.weight", [v.hiddenSize, v.inChannels, v.temporalPatchSize, v.patchSize, v.patchSize]],
    ["visual.merger.ln_q.weight", [v.hiddenSize]],
    ["visual.merger.mlp.0.weight", [v.hiddenSize * v.spatialMergeSize ** 2, v.hiddenSize * v.spatialMergeSize ** 2]],
    ["visual.merger.mlp.2.weight", [v.outHiddenSize, v.hiddenSize * v.spatialMergeSize ** 2]],
  ];
  for (let i = 0; i < v.depth; i++) {
    const p = `visual.blocks.${i}`;
    shapes.push(
      [`${p}.norm1.weight`, [v.hiddenSize]],
      [`${p}.norm2.weight`, [v.hiddenSize]],
      [`${p}.attn.qkv.weight`, [3 * v.hiddenSize, v.hiddenSize]],
      [`${p}.attn.qkv.bias`, [3 * v.hiddenSize]],
      [`${p}.attn.proj.weight`, [v.hiddenSize, v.hiddenSize]],
      [`${p}.mlp.gate_proj.weight`, [v.intermediateSize, v.hiddenSize]],
      [`${p}.mlp.up_proj.weight`, [v.intermediateSize, v.hiddenSize]],
      [`${p}.mlp.down_proj.weight`, [v.hiddenSize, v.intermediateSize]],
    );
  }
  for (const [name, shape] of shapes) expectShape(requireWeight(weights, name, where), shape, name, where);
}
