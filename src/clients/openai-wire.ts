/**
 * Translation between vagen's messages and the OpenAI chat-completions wire format.
 * Images become base64 PNG data URLs (`image_url` parts), which vLLM, SGLang, OpenAI and
 * OpenRouter all accept.
 */
import { imageToDataUrl } from "./image-encoding.ts";
import type { ChatMessage } from "../core/chat.ts";
import type { Completion, SamplingParams } from "./types.ts";

export { imageToDataUrl } from "./image-encoding.ts";

export type WirePart = { type: "text"; text: string } | { type: "image_url"; image_url: { url: string } };

export interface WireMessage {
  role: string;
  content: string | WirePart[];
}

/**
 * Text-only messages are sent as plain strings (every server accepts those, and some
 * text-only servers accept nothing else); messages with images as part lists.
 */
export function toWireMessage(message: ChatMessage): WireMessage {
  const hasImage = message.content.some((p) => p.type === "image");
  if (!hasImage) return { role: message.role, content: message.content.map((p) => (p.type === "text" ? p.text : "")).join("") };
  const parts: WirePart[] = message.content.map((p) =>
    p.type === "text" ? { type: "text", text: p.text } : { type: "image_url", image_url: { url: imageToDataUrl(p.image) } },
  );
  return { role: message.role, content: parts };
}

export function buildRequestBody(
  model: string,
  messages: ChatMessage[],
  sampling: SamplingParams,
  extraBody: Record<string, unknown> = {},
): Record<string, unknown> {
  const body: Record<string, unknown> = { model, messages: messages.map(toWireMessage) };
  if (sampling.temperature !== undefined) body.temperature = sampling.temperature;
  if (sampling.topP !== undefined) body.top_p = sampling.topP;
  if (sampling.maxTokens !== undefined) body.max_tokens = sampling.maxTokens;
  if (sampling.stop !== undefined && sampling.stop.length > 0) body.stop = sampling.stop;
  if (sampling.seed !== undefined) body.seed = sampling.seed;
  // Backend-specific knobs (e.g. vLLM's `top_k`, `logprobs`) pass through untouched.
  return { ...body, ...extraBody };
}

/** Why a response body could not be read as a chat completion. */
export class WireFormatError extends Error {}

/** Read a chat-completions response body (already JSON-parsed). */
export function parseCompletion(json: unknown): Completion {
  const root = asRecord(json, "response");
  if (root.error !== undefined) {
    const err = root.error as { message?: unknown };
    throw new WireFormatError(`server returned an error object: ${typeof err?.message === "string" ? err.message : JSON.stringify(root.error)}`);
  }
  const choices = root.choices;
  if (!Array.isArray(choices) || choices.length === 0) throw new WireFormatError("response has no choices");
  const choice = asRecord(choices[0], "choices[0]");
  const message = asRecord(choice.message, "choices[0].message");
  const usage = (root.usage ?? {}) as Record<string, unknown>;
  const completion: Completion = {
    text: contentText(message.content),
    finishReason: typeof choice.finish_reason === "string" ? choice.finish_reason : "unknown",
    usage: {
      promptTokens: numberOr(usage.prompt_tokens, 0),
      completionTokens: numberOr(usage.completion_tokens, 0),
    },
  };
  const sampled = readLogprobs(choice.logprobs);
  if (sampled) {
    completion.logprobs = sampled.logprobs;
    if (sampled.tokenIds) completion.tokenIds = sampled.tokenIds;
  }
  return completion;
}

function contentText(content: unknown): string {
  if (typeof content === "string") return content;
  if (content === null || content === undefined) return "";
  // Some servers answer with a list of parts even for text.
  if (Array.isArray(content)) {
    return content.map((p) => (p && typeof p === "object" && typeof (p as { text?: unknown }).text === "string" ? (p as { text: string }).text : "")).join("");
  }
  throw new WireFormatError(`choices[0].message.content is ${typeof content}, expected a string`);
}

/**
 * `choices[0].logprobs.content[]`, the OpenAI shape (also vLLM's and SGLang's): the
 * log-probs, and the token ids when the server writes tokens as `token_id:<id>` (vLLM's
 * `return_tokens_as_token_ids`), so training can use the exact sampled ids.
 */
function readLogprobs(raw: unknown): { logprobs: number[]; tokenIds?: number[] } | undefined {
  if (!raw || typeof raw !== "object") return undefined;
  const content = (raw as { content?: unknown }).content;
  if (!Array.isArray(content)) return undefined;
  const logprobs: number[] = [];
  const tokenIds: number[] = [];
  for (const entry of content) {
    const { logprob, token } = (entry ?? {}) as { logprob?: unknown; token?: unknown };
    if (typeof logprob !== "number") return undefined;
    logprobs.push(logprob);
    const id = typeof token === "string" ? /^token_id:(\d+)$/.exec(token) : null;
    if (id) tokenIds.push(Number(id[1]));
  }
  return tokenIds.length === logprobs.length && logprobs.length > 0 ? { logprobs, tokenIds } : { logprobs };
}

function asRecord(x: unknown, what: string): Record<string, unknown> {
  if (!x || typeof x !== "object" || Array.isArray(x)) throw new WireFormatError(`${what} is not a JSON object`);
  return x as Record<string, unknown>;
}

function numberOr(x: unknown, fallback: number): number {
  return typeof x === "number" && Number.isFinite(x) ? x : fallback;
}
