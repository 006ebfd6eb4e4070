/**
 * The inference-client seam. Harnesses talk to a model only through `InferenceClient`;
 * the OpenAI-compatible HTTP client and the in-process engine both implement it.
 *
 * Messages carry images as RGB pixels, not URLs, so an in-process client can feed them
 * to the vision tower directly; an HTTP client encodes them (PNG data URLs) on the wire.
 */
import type { RGBImage } from "../../envs/_common/types.ts";

export type Role = "system" | "user" | "assistant";

export type ContentPart = { type: "text"; text: string } | { type: "image"; image: RGBImage };

export interface ChatMessage {
  role: Role;
  content: ContentPart[];
}

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

export function textPart(text: string): ContentPart {
  return { type: "text", text };
}

export function imagePart(image: RGBImage): ContentPart {
  return { type: "image", image };
}

/** The message's text parts joined, images left out. */
export function messageText(message: ChatMessage): string {
  return message.content.map((p) => (p.type === "text" ? p.text : "")).join("");
}
