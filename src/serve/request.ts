/**
 * What a `/v1/chat/completions` request may ask for, and its conversion to engine input.
 *
 * Every OpenAI parameter is either honoured or refused with a 400 that names it: a client
 * that asks for tools, JSON mode or several choices learns at once that it will not get
 * them, instead of getting an answer that silently ignored the request. Parameters that
 * change nothing about the answer (`user`, `metadata`, ...) are accepted, and so are the
 * others at the one value that asks for nothing (`frequency_penalty: 0`, `tools: []`).
 */
import * as v from "valibot";
import type { ChatMessage, ContentPart } from "../core/chat.ts";
import { badRequest } from "./http.ts";
import { decodeImages, readImagePart, type PendingImage, type PixelLimits } from "./images.ts";
import type { SamplingOptions } from "../engine/types.ts";

const TextPart = v.object({ type: v.literal("text"), text: v.string() });
const ImageUrl = v.object({ url: v.string(), detail: v.optional(v.nullable(v.string())) });
const ImagePart = v.object({ type: v.literal("image_url"), image_url: v.union([ImageUrl, v.string()]) });
const WireMessage = v.object({
  role: v.picklist(["system", "user", "assistant"], 'expected "system", "user" or "assistant" (tool messages are not supported)'),
  content: v.union([v.string(), v.array(v.union([TextPart, ImagePart])), v.null()]),
});
type WireMessage = v.InferOutput<typeof WireMessage>;

const ChatRequest = v.object({
  model: v.optional(v.string()),
  messages: v.pipe(v.array(WireMessage), v.minLength(1, "at least one message")),
  temperature: v.optional(v.nullable(v.pipe(v.number(), v.minValue(0), v.maxValue(2)))),
  top_p: v.optional(v.nullable(v.pipe(v.number(), v.gtValue(0), v.maxValue(1)))),
  top_k: v.optional(v.nullable(v.pipe(v.number(), v.integer(), v.minValue(-1)))),
  max_tokens: v.optional(v.nullable(v.pipe(v.number(), v.integer(), v.minValue(1)))),
  max_completion_tokens: v.optional(v.nullable(v.pipe(v.number(), v.integer(), v.minValue(1)))),
  stop: v.optional(v.nullable(v.union([v.string(), v.array(v.string())]))),
  stop_token_ids: v.optional(v.array(v.pipe(v.number(), v.integer(), v.minValue(0)))),
  ignore_eos: v.optional(v.boolean()),
  seed: v.optional(v.nullable(v.pipe(v.number(), v.integer()))),
  stream: v.optional(v.nullable(v.boolean())),
  stream_options: v.optional(v.nullable(v.object({ include_usage: v.optional(v.nullable(v.boolean())) }))),
  logprobs: v.optional(v.nullable(v.boolean())),
  top_logprobs: v.optional(
    v.nullable(v.pipe(v.number(), v.integer(), v.minValue(0), v.maxValue(0, "only 0 is supported (the sampled token's log-prob, no alternatives)"))),
  ),
  n: v.optional(v.nullable(v.pipe(v.number(), v.literal(1, "only 1 is supported (one choice per request)")))),
  /** vagen: the generated ids on each choice. */
  return_token_ids: v.optional(v.boolean()),
  /** vLLM's: log-prob tokens written as `token_id:<id>`, so clients get the exact ids. */
  return_tokens_as_token_ids: v.optional(v.nullable(v.boolean())),
});
export type ChatRequest = v.InferOutput<typeof ChatRequest>;

/** Parameters that change nothing about the answer: identifiers and bookkeeping. */
const WITHOUT_EFFECT = new Set(["user", "metadata", "safety_identifier", "prompt_cache_key", "parallel_tool_calls"]);

const isEmptyList = (x: unknown) => Array.isArray(x) && x.length === 0;

/** Parameters accepted only at the value that asks for nothing, and what else they would need. */
const ONLY_NEUTRAL: Record<string, { accepts: (x: unknown) => boolean; expected: string }> = {
  frequency_penalty: { accepts: (x) => x === 0, expected: "0 (penalties are not implemented)" },
  presence_penalty: { accepts: (x) => x === 0, expected: "0 (penalties are not implemented)" },
  logit_bias: {
    accepts: (x) => typeof x === "object" && !Array.isArray(x) && Object.keys(x as object).length === 0,
    expected: "{} (logit biases are not implemented)",
  },
  tools: { accepts: isEmptyList, expected: "[] (this server has no tool calling)" },
  functions: { accepts: isEmptyList, expected: "[] (this server has no function calling)" },
  tool_choice: { accepts: (x) => x === "none", expected: '"none" (this server has no tool calling)' },
  function_call: { accepts: (x) => x === "none", expected: '"none" (this server has no function calling)' },
  response_format: {
    accepts: (x) => typeof x === "object" && (x as { type?: unknown }).type === "text",
    expected: '{"type": "text"} (JSON mode and structured outputs are not implemented)',
  },
  modalities: { accepts: (x) => Array.isArray(x) && x.every((m) => m === "text"), expected: '["text"] (answers are text only)' },
  store: { accepts: (x) => x === false, expected: "false (completions are not stored)" },
};

const KNOWN = new Set([...Object.keys(ChatRequest.entries), ...WITHOUT_EFFECT, ...Object.keys(ONLY_NEUTRAL)]);

/** Validate a parsed body: unknown or unhonourable parameters first, then the schema. */
export function parseChatRequest(json: unknown): ChatRequest {
  if (!json || typeof json !== "object" || Array.isArray(json)) throw badRequest("the body must be a JSON object");
  for (const [key, value] of Object.entries(json)) {
    if (!KNOWN.has(key)) throw badRequest(`${key}: unsupported parameter`, key, "unsupported_parameter");
    const rule = ONLY_NEUTRAL[key];
    if (rule && value !== null && !rule.accepts(value)) {
      throw badRequest(`${key}: only ${rule.expected} is supported, got ${JSON.stringify(value).slice(0, 80)}`, key, "unsupported_value");
    }
  }
  const parsed = v.safeParse(ChatRequest, json);
  if (!parsed.success) {
    const issue = parsed.issues[0];
    const path = issue.path?.map((p) => String(p.key)).join(".") ?? "";
    throw badRequest(`${path ? `${path}: ` : ""}${issue.message}`, path || undefined);
  }
  return parsed.output;
}

/**
 * The served model's names: a request may name one of them, or a Hugging Face id whose
 * last segment is one (`Qwen/Qwen2.5-VL-3B-Instruct` for a directory of that name), or
 * leave `model` out.
 */
export function checkModelName(requested: string | undefined, served: readonly string[]): void {
  if (requested === undefined || served.includes(requested)) return;
  const lastSegment = requested.slice(requested.lastIndexOf("/") + 1);
  if (requested.includes("/") && served.includes(lastSegment)) return;
  throw badRequest(
    `model: this server serves ${served.map((s) => JSON.stringify(s)).join(", ")}, not ${JSON.stringify(requested)}`,
    "model",
    "model_not_found",
  );
}

export interface PromptSizeLimits extends PixelLimits {
  maxPromptTokens: number;
  /** UTF-8 bytes of the vocabulary's longest token: a prompt of n tokens holds at most n times this much text. */
  longestTokenBytes: number;
}

/**
 * The request's messages as engine input. Sizes are checked before any work that grows
 * with them: text against what `maxPromptTokens` tokens can hold (before tokenizing),
 * images against the pixel limits (before decoding).
 */
export function toChatMessages(messages: readonly WireMessage[], limits: PromptSizeLimits): ChatMessage[] {
  let textBytes = 0;
  const pending: PendingImage[] = [];
  messages.forEach((m, i) => {
    if (typeof m.content === "string") textBytes += Buffer.byteLength(m.content, "utf8");
    else
      m.content?.forEach((part, j) => {
        if (part.type === "text") textBytes += Buffer.byteLength(part.text, "utf8");
        else pending.push(readImagePart(imageUrl(part.image_url, `messages.${i}.content.${j}`), `messages.${i}.content.${j}`, limits));
      });
  });
  const maxTextBytes = limits.maxPromptTokens * limits.longestTokenBytes;
  if (textBytes > maxTextBytes) {
    throw badRequest(
      `the messages hold ${textBytes} bytes of text, more than a prompt of at most ${limits.maxPromptTokens} tokens can hold ` +
        `(${maxTextBytes} bytes: ${limits.maxPromptTokens} tokens of at most ${limits.longestTokenBytes} bytes; --max-prompt-tokens)`,
      "messages",
      "context_length_exceeded",
    );
  }
  const images = decodeImages(pending, limits);
  let nextImage = 0;
  return messages.map((m) => {
    const content: ContentPart[] = [];
    if (typeof m.content === "string") content.push({ type: "text", text: m.content });
    else for (const part of m.content ?? []) content.push(part.type === "text" ? { type: "text", text: part.text } : { type: "image", image: images[nextImage++]! });
    return { role: m.role, content };
  });
}

/** The URL of an image part; `detail: "low"` asks for a downscaled image, which this server does not make. */
function imageUrl(imageUrl: string | v.InferOutput<typeof ImageUrl>, param: string): string {
  if (typeof imageUrl === "string") return imageUrl;
  const detail = imageUrl.detail;
  if (detail != null && detail !== "auto" && detail !== "high") {
    throw badRequest(`${param}.image_url.detail: only "auto" or "high" is supported, got ${JSON.stringify(detail)}`, `${param}.image_url.detail`, "unsupported_value");
  }
  return imageUrl.url;
}

export function toSampling(body: ChatRequest): Partial<SamplingOptions> {
  const s: Partial<SamplingOptions> = {};
  if (body.temperature != null) s.temperature = body.temperature;
  if (body.top_p != null) s.topP = body.top_p;
  if (body.top_k != null) s.topK = Math.max(0, body.top_k);
  const max = body.max_completion_tokens ?? body.max_tokens;
  if (max != null) s.maxNewTokens = max;
  if (body.stop != null) s.stopStrings = typeof body.stop === "string" ? [body.stop] : body.stop;
  if (body.stop_token_ids) s.stopTokenIds = body.stop_token_ids;
  if (body.ignore_eos) s.ignoreStopTokens = true;
  if (body.seed != null) s.seed = body.seed;
  return s;
}
