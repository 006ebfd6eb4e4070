/**
 * The seam between family-independent code (generation loop, CLI, engine, trainer) and
 * one model family (Qwen2.5-VL today). A family turns chat messages + images into a
 * `PromptInput`, and decodes batches of them through a `DecodeSession`.
 */
import type { RGBImage } from "../core/image.ts";
import type { DType, Device } from "../torch/index.ts";
import type { TemplateMessage } from "./chat-template.ts";
import type { TextTokenizer } from "./tokenizer.ts";

/** One encoded prompt: token ids (image markers expanded) and its images. */
export interface PromptInput {
  inputIds: number[];
  images: readonly RGBImage[];
}

/** Incremental decoding of a batch of prompts with a KV cache. */
export interface DecodeSession {
  /** The id written into finished rows' slots. */
  readonly padTokenId: number;
  /** Float32 logits of the next token, one row per prompt. */
  nextLogits(): Float32Array[];
  /** Feed one token per row; rows with active=false are masked out from now on. */
  append(tokens: readonly number[], active: readonly boolean[]): void;
  dispose(): void;
}

export interface ChatModel {
  readonly family: string;
  readonly tokenizer: TextTokenizer;
  readonly eosTokenIds: readonly number[];
  readonly device: Device;
  readonly dtype: DType;
  /** Render with the chat template (ending with the assistant header) and encode. */
  encodeChat(messages: readonly TemplateMessage[], images: readonly RGBImage[]): PromptInput;
  startDecoding(prompts: readonly PromptInput[]): DecodeSession;
  dispose(): void;
}

export interface LoadModelOptions {
  device: Device;
  dtype: DType;
}

export interface ModelFamily {
  /** config.json `model_type` values this family loads. */
  readonly modelTypes: readonly string[];
  load(dir: string, opts: LoadModelOptions): ChatModel;
}
