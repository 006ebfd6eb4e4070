/**
 * Qwen3-VL's language model: the shared decoder (decoder.ts) with Qwen3's layers (per-head
 * q/k RMSNorm, no q/k/v biases) and interleaved M-RoPE (rotary.ts: frequency pair j reads
 * the temporal, height or width position by j mod 3, as mrope_section bounds them). The
 * deepstack vision features arrive as the decoder's `layerResiduals`.
 */
import { Decoder, type DecoderConfig } from "../decoder.ts";
import type { Weights } from "../weights.ts";
import type { Qwen3VLTextConfig } from "./config.ts";

/** The shared decoder's view of Qwen3-VL's text config. */
export function qwen3VLDecoderConfig(c: Qwen3VLTextConfig): DecoderConfig {
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
    ropeInterleaved: true,
    tieWordEmbeddings: c.tieWordEmbeddings,
    qkvBias: false,
    qkNorm: true,
  };
}

export class Qwen3VLTextModel extends Decoder {
  constructor(
    readonly textConfig: Qwen3VLTextConfig,
    weights: Weights,
  ) {
    super(qwen3VLDecoderConfig(textConfig), weights, "Qwen3-VL language model");
  }
}
