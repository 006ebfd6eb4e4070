/**
 * What the engine needs from a model family. Nothing here assumes Qwen, a vision tower,
 * or one GPU: a family provides an adapter (embeddings, rotary positions, the decoder
 * forward, the LM head) and the engine owns everything about batching, the KV cache and
 * sampling.
 *
 * The key seam is `AttentionBackend`: the decoder computes q/k/v and applies its rotary
 * embedding (or lets the backend fold it into its kernel), then hands them to the
 * backend, which stores k/v in the engine's cache and attends over each sequence's
 * cached prefix. The model never sees how (or where) the
 * cache is laid out.
 */
import type { DType, Device, Tensor } from "../torch/index.ts";
import type { Prompt } from "./types.ts";

export interface ModelSpec {
  numLayers: number;
  numHeads: number;
  numKvHeads: number;
  headDim: number;
  hiddenSize: number;
  vocabSize: number;
  /** Number of rotary position axes: 1 for ordinary RoPE, 3 for M-RoPE (Qwen2-VL family). */
  positionAxes: number;
  /** Compute dtype of activations and the KV cache. */
  dtype: DType;
  device: Device;
  /** Longest sequence the model's positions support (caps the KV slot size). */
  maxPositions: number;
  /** Bytes of the weights one decode step reads (not a vision tower), for the bandwidth roofline. */
  weightBytes: number;
}

export interface AttentionBackend {
  /**
   * q: (B, numHeads, T, headDim); k, v: (B, numKvHeads, T, headDim), rotary already
   * applied. Stores k/v for these T new positions of each row and returns the attention
   * output over each row's cached prefix plus the new positions, (B, numHeads, T, headDim).
   */
  attend(layer: number, q: Tensor, k: Tensor, v: Tensor): Tensor;
  /**
   * Optional: the same with q and k unrotated and the rotary tables cos, sin (B, T,
   * headDim) (rotate-half convention), for backends that fold the rotation into their
   * attention kernel. Undefined where the backend does not: the model then rotates and
   * calls `attend`.
   */
  attendRotary?(layer: number, q: Tensor, k: Tensor, v: Tensor, cos: Tensor, sin: Tensor): Tensor | undefined;
}

export interface ModelAdapter {
  readonly spec: ModelSpec;
  /**
   * Rotary positions of every prompt token, [axis][token] (positionAxes rows). Generated
   * tokens continue from the largest prompt position + 1, one step per token, on every axis.
   */
  promptPositions(prompt: Prompt): number[][];
  /**
   * Input embeddings of prompt tokens [from, end): (end - from, hiddenSize). Images whose
   * placeholders overlap the range go through the vision tower here (once per image).
   */
  embedPrompt(prompt: Prompt, from: number): Tensor;
  /** Embeddings of generated token ids (B,) -> (B, hiddenSize). */
  embedTokens(ids: Tensor): Tensor;
  /**
   * The decoder: (B, T, hiddenSize) embeddings and (positionAxes, B, T) int64 positions ->
   * final-normed hidden states (B, T, hiddenSize). Attention goes through `attention`.
   */
  forward(inputsEmbeds: Tensor, positions: Tensor, attention: AttentionBackend): Tensor;
  /** LM head: (N, hiddenSize) -> (N, vocabSize). */
  logits(hidden: Tensor): Tensor;
}
