/**
 * The inference-client seam. Harnesses talk to a model only through `InferenceClient`;
 * the OpenAI-compatible HTTP client and the in-process engine both implement it.
 *
 * Messages (`src/core/chat.ts`) carry images as RGB pixels, not URLs, so an in-process
 * client can feed them to the vision tower directly; an HTTP client encodes them (PNG
 * data URLs) on the wire.
 */
import type { ChatMessage } from "../core/chat.ts";

/** Generation settings for one request. Unset fields fall back to the server's defaults. */
export interface SamplingParams {
  temperature?: number;
  topP?: number;
  /** Upper bound on generated tokens for this turn. */
  maxTokens?: number;
  stop?: string[];
  seed?: number;
}

export interface Usage {
  promptTokens: number;
  completionTokens: number;
}

export interface Completion {
  text: string;
  /** As the backend reports it: "stop", "length", ... ("unknown" when it says nothing). */
  finishReason: string;
  usage: Usage;
  /**
   * Exact generated token ids, when the backend can give them (the in-process engine
   * always does), so training never re-tokenizes generated text.
   */
  tokenIds?: number[];
  /** Sampling log-probabilities, one per generated token, when available. */
  logprobs?: number[];
}

export interface CreateOptions {
  /** Aborts the request (and any retry wait); the call then rejects with an AbortError. */
  signal?: AbortSignal;
}

export interface InferenceClient {
  /** A short description for logs and metrics (e.g. the model name). Never a secret. */
  readonly description: string;
  create(messages: ChatMessage[], sampling: SamplingParams, options?: CreateOptions): Promise<Completion>;
  close?(): Promise<void>;
}
