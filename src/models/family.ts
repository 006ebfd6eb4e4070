/**
 * The model-family seam: everything the engine, the trainer and the CLI know about a
 * model goes through `ModelFamily`. A family is registered by config.json's `model_type`
 * (index.ts) and, once loaded, is one object with three faces:
 *
 *   PromptBuilder   chat messages -> `Prompt` (token ids, image spans); ids -> text
 *   FamilyDecoder   what the engine runs: prompt positions and embeddings (images through
 *                   the vision tower once), token embeddings, the decoder over an
 *                   `AttentionBackend` (attention.ts), the LM head
 *   forwardForTraining  the differentiable forward over a padded batch of sequences
 *   conversationCodec   token-level conversations in the family's chat format
 *
 * The engine owns batching, the KV cache and sampling; the family owns the weights and
 * the maths, so generation, serving, evaluation and training run one decoder.
 */
import type { ChatMessage } from "../core/chat.ts";
import type { RGBImage } from "../core/image.ts";
import type { DType, Device, Tensor } from "../torch/index.ts";
import type { AttentionBackend } from "./attention.ts";
import type { ConversationCodec } from "./conversation.ts";
import type { Prompt } from "./prompt.ts";
import type { TextTokenizer } from "./tokenizer.ts";

/** The shapes and limits a runner sizes its cache and buffers from. */
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

/** From chat messages to prompts and from generated ids back to text. */
export interface PromptBuilder {
  /** The name clients use for the model (`model` in the OpenAI API). */
  readonly modelName: string;
  /** Ids that end an assistant turn. */
  readonly eosTokenIds: readonly number[];
  /** Render the conversation (ending with the assistant header) and tokenize it, images included. */
  buildPrompt(messages: readonly ChatMessage[]): Prompt;
  /** Generated ids to text, special tokens skipped. */
  decode(ids: readonly number[]): string;
  /**
   * The raw bytes one id contributes to `decode`'s text (a byte-level BPE token may end
   * inside a UTF-8 character, so decoding it alone cannot give them); absent when the
   * tokenizer cannot say.
   */
  readonly tokenBytes?: (id: number) => Uint8Array;
}

/**
 * A prompt range's decoder inputs where the family feeds more than input embeddings:
 * Qwen3-VL's deepstack adds vision features to the residual stream after its first
 * decoder layers, at the image tokens.
 */
export interface PromptInputs {
  /** (n, hiddenSize) input embeddings, as `embedPrompt` gives them. */
  embeds: Tensor;
  /**
   * (n, hiddenSize) each: entry i is added after decoder layer i (zero at text tokens);
   * absent when nothing in the range gets any. Hand them to `forward` for the same tokens.
   */
  layerResiduals?: Tensor[];
}

/** What the engine runs. All tensors are on `spec.device` in `spec.dtype`. */
export interface FamilyDecoder {
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
  /**
   * `embedPrompt` of several prompts at once, their images through the vision tower
   * together (a rollout's prefill holds one new image per env: one vision call instead of
   * one each). Optional; families without it, or with `promptInputs`, are embedded one
   * prompt at a time.
   */
  embedPrompts?(items: readonly { prompt: Prompt; from: number }[]): Tensor[];
  /**
   * `embedPrompt` and the per-layer residuals of the same range, for families that have
   * them (each image through the vision tower once for both); a family without them leaves
   * this out and the engine calls `embedPrompt`.
   */
  promptInputs?(prompt: Prompt, from: number): PromptInputs;
  /** Embeddings of token ids (B,) -> (B, hiddenSize). */
  embedTokens(ids: Tensor): Tensor;
  /**
   * The decoder: (B, T, hiddenSize) embeddings and (positionAxes, B, T) int64 positions ->
   * final-normed hidden states (B, T, hiddenSize). Attention goes through `attention`.
   * `layerResiduals` ((B, T, hiddenSize) each, from `promptInputs` for these tokens) are
   * added after the first decoder layers; families without them ignore it.
   */
  forward(inputsEmbeds: Tensor, positions: Tensor, attention: AttentionBackend, layerResiduals?: readonly Tensor[]): Tensor;
  /** LM head: (..., hiddenSize) -> (..., vocabSize). */
  logits(hidden: Tensor): Tensor;
}

/**
 * A padded batch of whole sequences (prompt and response) for the training forward.
 * Rows may be padded on either side; images are given per row, in the order their
 * placeholders appear in that row.
 */
export interface TrainingBatch {
  /** (B, T) token ids, image placeholders expanded. */
  inputIds: readonly (readonly number[])[];
  /** (B, T) 1 at real tokens, 0 at padding; omitted when no row is padded. */
  attentionMask?: readonly (readonly number[])[];
  /** Per row, its images in placeholder order (empty for text rows). */
  images: readonly (readonly RGBImage[])[];
}

export interface TrainingForwardOptions {
  /** libtorch's math attention instead of its fused kernels (as the engine's `attention: math`). */
  mathAttention?: boolean;
}

export interface ModelFamily extends PromptBuilder, FamilyDecoder {
  /** The family's name (config.json `model_type`). */
  readonly family: string;
  readonly tokenizer: TextTokenizer;
  readonly device: Device;
  readonly dtype: DType;
  /**
   * The weights by their checkpoint names, as loaded: the map the engine and the trainer
   * share. Update tensors in place (an optimizer step, `copy_`): the decoder resolved
   * them once at load, so a tensor put in with `set` would not be read.
   */
  readonly weights: Map<string, Tensor>;
  /** Ids the model must never sample (image placeholders, vision markers). */
  readonly visionTokenIds: readonly number[];
  /**
   * Whether the named weight belongs to the vision encoder (tower and merger/projector):
   * what `freeze_vision_tower` leaves untrained.
   */
  isVisionWeight(name: string): boolean;
  /** The codec of token-level conversations (conversation.ts) in this family's chat format. */
  conversationCodec(): ConversationCodec;
  /**
   * The training forward: final-normed hidden states (B, T, hiddenSize) of a padded batch,
   * differentiable with respect to the family's weights (run it with gradients enabled;
   * weights a trainer marks `requiresGrad` get gradients). Take `logits(hidden)` for
   * log-probs: position t's logits score token t + 1. It runs the same decoder as the
   * engine with causal attention over the batch, so on the same tokens its log-probs
   * equal the engine's sampling log-probs up to kernel rounding.
   */
  forwardForTraining(batch: TrainingBatch, opts?: TrainingForwardOptions): Tensor;
  /** Frees the weights. */
  dispose(): void;
}

export interface LoadModelOptions {
  device: Device;
  dtype: DType;
  /**
   * Extra variables every chat-template rendering of the model gets, as keyword
   * arguments to transformers' apply_chat_template (Qwen3: `enable_thinking: false`).
   * Omitted: the template's own defaults, as transformers renders it.
   */
  chatTemplateVariables?: Readonly<Record<string, unknown>>;
}

/** Loads a model directory of one family. */
export type FamilyLoader = (dir: string, opts: LoadModelOptions) => ModelFamily;
