/**
 * Qwen2.5-VL's language model: the shared decoder (decoder.ts) with biased q/k/v and
 * multimodal rotary embeddings (M-RoPE: each frequency pair reads the temporal, height or
 * width position, as mrope_section splits them), and no q/k norms.
 */
import { Decoder, type DecoderConfig } from "../decoder.ts";
import type { Weights } from "../weights.ts";
import type { Qwen25VLTextConfig } from "./config.ts";

export type { DecoderInput } from "../decoder.ts";

/** The shared decoder's view of Qwen2.5-VL's text config. */
export function qwen25DecoderConfig(c: Qwen25VLTextConfig): DecoderConfig {
  return {
    vocabSize: c.vocabSize,
    hiddenSize: c.hiddenSize,
    intermediateSize: c.intermediateSize,
    numLayers: c.numLayers,
    numHeads: c.numHeads,
    numKvHeads: c.numKvHeads,
    headDim: c.headDim,
    rmsNormEps: c.rmsNormEps,
    ropeTheta: c.ropeTheta,
    ropeSections: c.mropeSection,
    tieWordEmbeddings: c.tieWordEmbeddings,
    qkvBias: true,
    qkNorm: false,
  };
}

export class Qwen25TextModel extends Decoder {
  constructor(
    readonly textConfig: Qwen25VLTextConfig,
    weights: Weights,
  ) {
    super(qwen25DecoderConfig(textConfig), weights, "Qwen2.5-VL language model");
  }
}
