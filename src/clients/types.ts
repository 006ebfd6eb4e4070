/**
 * The inference-client seam. Harnesses talk to a model only through `InferenceClient`;
 * the OpenAI-compatible HTTP client and the in-process engine both implement it.
 *
 * Messages (`src/core/chat.ts`) carry images as RGB pixels, not URLs, so an in-process
 * client can feed them to the vision tower directly; an HTTP client encodes them (PNG
 * data URLs) on the wire.
 */
import type { ChatMessage } from "../core/chat.ts";
import type { ConversationRecord } from "../models/conversation.ts";

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
  /** One stateless request: the whole conversation as messages. */
  create(messages: ChatMessage[], sampling: SamplingParams, options?: CreateOptions): Promise<Completion>;
  /**
   * A token-level conversation (clients that run the model in-process): the caller
   * appends each new message once and the sampled ids stay in it verbatim, so nothing is
   * re-rendered or re-tokenized and the model continues its own KV cache. Clients that
   * only speak messages (HTTP) leave it out; harnesses then use `create`.
   */
  openConversation?(): ClientConversation;
  close?(): Promise<void>;
}

/**
 * One token-level conversation (src/models/conversation.ts) bound to a model session.
 * It grows only at the end: messages the model did not write (mask 0), then a reply
 * whose sampled ids go in as generated (mask 1). Release it when done with it: the
 * model's cached state for it is freed; the record stays readable.
 */
export interface ClientConversation {
  /** The explicit session id the model continues (unique per client). */
  readonly id: string;
  /** Tokens so far. */
  readonly length: number;
  /** Tokens from the first sampled one on (the row's response region); 0 before any reply. */
  readonly responseLength: number;
  /** The most tokens the model can hold for one conversation (prompt and generated); undefined when unknown. */
  readonly contextLimit?: number;
  /** Append messages the model did not write, each tokenized alone with the chat template's framing; returns how many tokens they took. */
  addMessages(messages: readonly ChatMessage[]): number;
  /**
   * How many tokens `messages` would take if appended now, without appending them (for
   * budgets: the room a pending observation or a summary request needs); with
   * `replyPrompt`, the generation prompt that would follow them is counted too.
   */
  measure(messages: readonly ChatMessage[], options?: { replyPrompt?: boolean }): number;
  /**
   * Generate the next reply: the template's generation prompt, then sampling from the
   * conversation as it stands. The completion's `tokenIds` and `logprobs` are the ids
   * now in the conversation.
   */
  reply(sampling: SamplingParams, options?: CreateOptions): Promise<Completion>;
  /** Whether a sampled id is one the model must never write (an image placeholder or vision marker). */
  isVisionToken(id: number): boolean;
  /** Ids, loss mask, log-probs, turns and image spans so far (copies). */
  record(): ConversationRecord;
  /** Free the model's cached state for this conversation (idempotent). */
  release(): void;
}
