/**
 * GLM-4.1V / 4.6V's language model: the shared decoder (decoder.ts) with GLM-4's layers:
 * q/k/v biases, gate and up as one `gate_up_proj`, sandwich norms on the attention and MLP
 * outputs, and a rotation over the first headDim * partial_rotary_factor dimensions of each
 * head on adjacent pairs, whose frequency pairs read the temporal, height and width
 * positions in consecutive `mrope_section` blocks.
 */
import { Decoder, type DecoderConfig } from "../decoder.ts";
import type { Weights } from "../weights.ts";
import type { Glm4vTextConfig } from "./config.ts";

/** The shared decoder's view of GLM-4V's text config. */
export function glm4vDecoderConfig(c: Glm4vTextConfig): DecoderConfig {
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
    rotaryDim: c.rotaryDim,
    rotaryPairs: "adjacent",
    tieWordEmbeddings: c.tieWordEmbeddings,
    qkvBias: true,
    qkNorm: false,
    fusedGateUp: true,
    sandwichNorms: true,
  };
}

export class Glm4vTextModel extends Decoder {
  constructor(
    readonly textConfig: Glm4vTextConfig,
    weights: Weights,
  ) {
    super(glm4vDecoderConfig(textConfig), weights, "GLM-4V language model");
  }
}
