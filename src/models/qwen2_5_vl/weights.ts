/**
 * Qwen2.5-VL checkpoint names. transformers has saved them two ways: the published
 * layout (`model.layers.*`, `visual.*`, `lm_head.*`) and the 4.5x+ module layout
 * (`model.language_model.layers.*`, `model.visual.*`). Both map onto the published one,
 * which is what vagen's code and its checkpoints use.
 */
import type { Qwen25VLConfig } from "./config.ts";
import { expectShape, requireWeight, type Weights } from "../weights.ts";

export function canonicalQwen25VLName(name: string): string | undefined {
  if (name.startsWith("model.language_model.")) return `model.${name.slice("model.language_model.".length)}`;
  if (name.startsWith("model.visual.")) return name.slice("model.".length);
  // Rotary inverse frequencies are recomputed, never loaded.
  if (name.endsWith("rotary_emb.inv_freq") || name.endsWith("rotary_pos_emb.inv_freq")) return undefined;
  return name;
}

/** Check that every tensor the config needs is present with the right shape. */
export function checkQwen25VLWeights(weights: Weights, config: Qwen25VLConfig, where: string): void {
  const t = config.text;
  const v = config.vision;
  const kv = t.numKvHeads * t.headDim;
  const shapes: [string, number[]][] = [
    ["model.embed_tokens.weight", [t.vocabSize, t.hiddenSize]],
    ["model.norm.weight", [t.hiddenSize]],
    ["visual.patch_embed.proj.weight", [v.hiddenSize, v.inChannels, v.temporalPatchSize, v.patchSize, v.patchSize]],
    ["visual.merger.ln_q.weight", [v.hiddenSize]],
    ["visual.merger.mlp.0.weight", [v.hiddenSize * v.spatialMergeSize ** 2, v.hiddenSize * v.spatialMergeSize ** 2]],
    ["visual.merger.mlp.2.weight", [v.outHiddenSize, v.hiddenSize * v.spatialMergeSize ** 2]],
  ];
  if (!t.tieWordEmbeddings) shapes.push(["lm_head.weight", [t.vocabSize, t.hiddenSize]]);
  for (let i = 0; i < t.numLayers; i++) {
    const p = `model.layers.${i}`;
    shapes.push(
      [`${p}.self_attn.q_proj.weight`, [t.numHeads * t.headDim, t.hiddenSize]],
      [`${p}.self_attn.q_proj.bias`, [t.numHeads * t.headDim]],
      [`${p}.self_attn.k_proj.weight`, [kv, t.hiddenSize]],
      [`${p}.self_attn.k_proj.bias`, [kv]],
      [`${p}.self_attn.v_proj.weight`, [kv, t.hiddenSize]],
      [`${p}.self_attn.v_proj.bias`, [kv]],
      [`${p}.self_attn.o_proj.weight`, [t.hiddenSize, t.numHeads * t.headDim]],
      [`${p}.mlp.gate_proj.weight`, [t.intermediateSize, t.hiddenSize]],
      [`${p}.mlp.up_proj.weight`, [t.intermediateSize, t.hiddenSize]],
      [`${p}.mlp.down_proj.weight`, [t.hiddenSize, t.intermediateSize]],
      [`${p}.input_layernorm.weight`, [t.hiddenSize]],
      [`${p}.post_attention_layernorm.weight`, [t.hiddenSize]],
    );
  }
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
