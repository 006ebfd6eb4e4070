/**
 * Qwen3 checkpoint names: transformers' Qwen3ForCausalLM layout (`model.layers.*`,
 * `model.embed_tokens`, `model.norm`, `lm_head`), which is what the shared decoder reads
 * and what vagen's checkpoints and exports keep.
 */
import { decoderWeightShapes, type DecoderConfig } from "../decoder.ts";
import { expectShape, requireWeight, type Weights } from "../weights.ts";

/**
 * The name a checkpoint tensor keeps, or undefined to drop it: rotary inverse frequencies
 * are recomputed, and with tied embeddings an `lm_head.weight` some checkpoints still
 * carry is ignored, as transformers ignores it (the head is the embedding matrix), so
 * the weight map holds exactly what the model reads and a trainer updates.
 */
export function canonicalQwen3Name(name: string, config: Pick<DecoderConfig, "tieWordEmbeddings">): string | undefined {
  if (name.endsWith("rotary_emb.inv_freq")) return undefined;
  if (config.tieWordEmbeddings && name === "lm_head.weight") return undefined;
  return name;
}

/** Check that every tensor the config needs is present with the right shape. */
export function checkQwen3Weights(weights: Weights, config: DecoderConfig, where: string): void {
  for (const [name, shape] of decoderWeightShapes(config)) expectShape(requireWeight(weights, name, where), shape, name, where);
}
