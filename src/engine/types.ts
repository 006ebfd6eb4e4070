/**
 * The engine's public vocabulary: what a caller asks for and what it gets back.
 *
 * Everything here is plain data (no tensors), so callers (the in-process client, the
 * OpenAI-compatible server, benchmarks) never touch the tensor library.
 */
import type { Prompt } from "../models/prompt.ts";

/** Prompts are the family seam's (src/models/prompt.ts): token ids and image spans. */
export type { Prompt, PromptImage } from "../models/prompt.ts";

/**
 * How to pick each next token and when to stop: the one in-process sampling type. The
 * runner's per-row settings are picks of it; clients and the server map their wire
 * fields (max_tokens, stop, top_p) onto it.
 */
export interface SamplingOptions {
  /** 0 means greedy (argmax). */
  temperature: number;
  /** Nucleus sampling mass; 1 disables it. */
  topP: number;
  /** Keep only the k most likely tokens; 0 disables it. */
  topK: number;
  /**
   * Seeds this request's own random stream, so its tokens do not depend on what else
   * is in the batch. Unseeded requests share the engine's stream.
   */
  seed?: number;
  maxNewTokens: number;
  /** Generation ends after one of these ids is sampled (the id is kept in `tokenIds`). */
  stopTokenIds: number[];
  /** Generation ends when the text contains one of these; the text is cut before it. */
  stopStrings: string[];
  /** Keep generating past stop token ids (benchmarks use it for fixed-length decode). */
  ignoreStopTokens: boolean;
}

export type FinishReason = "stop" | "length" | "abort";

export interface GenerateRequest {
  prompt: Prompt;
  sampling?: Partial<SamplingOptions>;
  /**
   * A multi-turn conversation's id. The engine keeps the session's KV cache after the
   * request ends, so the next turn only prefills the tokens that differ from it.
   */
  sessionId?: string;
  /**
   * The prompt continues the session's previous turn as it was generated (a token-level
   * conversation, src/models/conversation.ts: the previous prompt, the sampled ids, then
   * new tokens). The engine then requires the session's cached tokens to be a prefix of
   * the prompt and fails the request (dropping the session) where they are not, instead
   * of quietly re-prefilling from the first difference. An evicted session has nothing
   * cached and is re-prefilled as usual.
   */
  continuesSession?: boolean;
  signal?: AbortSignal;
  /** Called once per generated token, in order (streaming). */
  onToken?: (event: TokenEvent) => void;
  /** Also return the full logits row each token was sampled from (tests, debugging). */
  returnLogits?: boolean;
}

export interface TokenEvent {
  tokenId: number;
  logprob: number;
  /** Text that became final with this token (may be "" while a stop string or a UTF-8 sequence is pending). */
  textDelta: string;
}

export interface GenerationResult {
  /** Generated ids, exactly as sampled (a stop token id is included). */
  tokenIds: number[];
  /** Log-probability of each sampled id under the temperature-scaled distribution. */
  logprobs: number[];
  /** Decoded generated text, cut before a matched stop string. */
  text: string;
  finishReason: FinishReason;
  /** The stop string or stop token id that ended generation, if any. */
  stoppedBy?: string | number;
  promptTokens: number;
  /** Prompt tokens whose KV came from the session cache instead of a prefill. */
  cachedPromptTokens: number;
  /** When requested: the logits each token was sampled from, one row per token. */
  logits?: Float32Array[];
}

/** Counters a monitor or benchmark can read at any time. */
export interface EngineStats {
  prefillTokens: number;
  cachedPromptTokens: number;
  decodeTokens: number;
  prefillSteps: number;
  decodeSteps: number;
  /** Sessions whose KV cache was dropped to make room (their next turn re-prefills). */
  evictions: number;
  runningSequences: number;
  waitingRequests: number;
  idleSessions: number;
  freeSlots: number;
}
