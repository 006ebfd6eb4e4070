/**
 * InternVL checkpoint names. InternVLForConditionalGeneration's modules are
 * `model.language_model.*` (the Qwen3 decoder), `model.vision_tower.*` (InternViT),
 * `model.multi_modal_projector.*` and `lm_head.weight`, as the published -HF checkpoints
 * store them; transformers 5 saves the older LLaVA-style layout instead
 * (`language_model.model.*`, `language_model.lm_head.weight`, `vision_tower.*`,
 * `multi_modal_projector.*`) and maps it back at load. vagen's code and its own
 * checkpoints use the shared decoder's `model.*` and the short `vision_tower.*` and
 * `multi_modal_projector.*`. All three load; `vagen export` writes the class's names.
 */
import { decoderWeightShapes } from "../decoder.ts";
import { expectShape, requireWeight, type Weights } from "../weights.ts";
import type { InternVLConfig } from "./config.ts";

const LANGUAGE = "model.language_model.";
const LEGACY_LANGUAGE = "language_model.model.";
const VISION_PREFIXES = ["vision_tower.", "multi_modal_projector."];

/**
 * The name a checkpoint tensor takes in vagen, or undefined to drop it: rotary inverse
 * frequencies are recomputed, and with tied embeddings a stray `lm_head.weight` is
 * ignored, as transformers ignores it.
 */
export function canonicalInternVLName(name: string, tied: boolean): string | undefined {
  if (name.endsWith("rotary_emb.inv_freq")) return undefined;
  const head = name === "language_model.lm_head.weight" ? "lm_head.weight" : name;
  if (head === "lm_head.weight") return tied ? undefined : head;
  for (const prefix of [LANGUAGE, LEGACY_LANGUAGE]) if (name.startsWith(prefix)) return `model.${name.slice(prefix.length)}`;
  for (const prefix of VISION_PREFIXES) if (name.startsWith(`model.${prefix}`)) return name.slice("model.".length);
  return name;
}

/** A weight's name in InternVLForConditionalGeneration's own layout (the inverse of `canonicalInternVLName`): what `vagen export` writes. */
export function internVLCheckpointName(name: string): string {
  if (VISION_PREFIXES.some((p) => name.startsWith(p))) return `model.${name}`;
  if (name.startsWith("model.")) return `${LANGUAGE}${name.slice("model.".length)}`;
  return name;
}

/** A decoder module's name in transformers' class (`model.language_model.layers.N...`): what PEFT calls it. */
export function internVLPeftModuleName(path: string): string {
  return path.startsWith("model.layers.") ? `${LANGUAGE}${path.slice("model.".length)}` : path;
}

/** The InternViT encoder and the projector: what `freeze_vision_tower` leaves untrained. */
export function isInternVLVisionWeight(name: string): boolean {
  return VISION_PREFIXES.some((p) => name.startsWith(p));
}

/** Every tensor the config needs, with its shape. */
export function internVLWeightShapes(config: InternVLConfig): [string, number[]][] {
  const v = config.vision;
  const h = v.hiddenSize;
  const merged = h * config.shuffle ** 2;
  const textHidden = config.text.hiddenSize;
  const shapes: [string, number[]][] = [
    ...decoderWeightShapes(config.text),
    ["vision_tower.embeddings.cls_token", [1, 1, h]],
    ["vision_tower.embeddings.position_embeddings", [1, v.gridSide ** 2 + 1, h]],
    ["vision_tower.embeddings.patch_embeddings.projection.weight", [h, v.numChannels, v.patchSize, v.patchSize]],
    ["vision_tower.embeddings.patch_embeddings.projection.bias", [h]],
    ["multi_modal_projector.layer_norm.weight", [merged]],
    ["multi_modal_projector.layer_norm.bias", [merged]],
    ["multi_modal_projector.linear_1.weight", [textHidden, merged]],
    ["multi_modal_projector.linear_1.bias", [textHidden]],
    ["multi_modal_projector.linear_2.weight", [textHidden, textHidden]],
    ["multi_modal_projector.linear_2.bias", [textHidden]],
  ];
  for (let i = 0; i < v.numLayers; i++) {
    const p = `vision_tower.encoder.layer.${i}`;
    shapes.push(
      [`${p}.layernorm_before.weight`, [h]],
      [`${p}.layernorm_before.bias`, [h]],
      [`${p}.layernorm_after.weight`, [h]],
      [`${p}.layernorm_after.bias`, [h]],
      [`${p}.attention.q_proj.weight`, [h, h]],
      [`${p}.attention.k_proj.weight`, [h, h]],
      [`${p}.attention.v_proj.weight`, [h, h]],
      [`${p}.attention.projection_layer.weight`, [h, h]],
      [`${p}.attention.projection_layer.bias`, [h]],
      [`${p}.lambda_1`, [h]],
      [`${p}.lambda_2`, [h]],
      [`${p}.mlp.fc1.weight`, [v.intermediateSize, h]],
      [`${p}.mlp.fc1.bias`, [v.intermediateSize]],
      [`${p}.mlp.fc2.weight`, [h, v.intermediateSize]],
      [`${p}.mlp.fc2.bias`, [h]],
    );
    if (v.attentionBias) shapes.push([`${p}.attention.q_proj.bias`, [h]], [`${p}.attention.k_proj.bias`, [h]], [`${p}.attention.v_proj.bias`, [h]]);
  }
  return shapes;
}

/** Check that every tensor the config needs is present with the right shape. */
export function checkInternVLWeights(weights: Weights, config: InternVLConfig, where: string): void {
  for (const [name, shape] of internVLWeightShapes(config)) expectShape(requireWeight(weights, name, where), shape, name, where);
}
