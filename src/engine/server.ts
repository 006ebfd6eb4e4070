/**
 * An OpenAI-compatible HTTP API over the in-process engine (`vagen serve`):
 *
 *   GET  /v1/models
 *   POST /v1/chat/completions   text and image_url (PNG data URLs) content, streaming (SSE)
 *                               and non-streaming, logprobs of the sampled tokens
 *
 * Extensions beyond the OpenAI schema, all optional: `top_k`, `stop_token_ids`,
 * `ignore_eos`, and `return_token_ids` (adds the generated ids to each choice).
 * Multi-turn conversations reuse their KV cache: a request whose messages continue an
 * earlier answer's conversation continues that engine session.
 */
import * as v from "valibot";
import { decodePng } from "../../envs/_common/png.ts";
import type { RGBImage } from "../../envs/_common/types.ts";
import { EngineClient } from "../clients/engine-client.ts";
import type { ChatMessage, ContentPart } from "../clients/types.ts";
import type { ChatPromptBuilder } from "./chat.ts";
import type { Engine } from "./engine.ts";
import type { GenerationResult, SamplingOptions } from "./types.ts";

const TextPart = v.object({ type: v.literal("text"), text: v.string() });
const ImagePart = v.object({
  type: v.literal("image_url"),
  image_url: v.union([v.object({ url: v.string(), detail: v.optional(v.string()) }), v.string()]),
});
const WireMessage = v.object({
  role: v.picklist(["system", "user", "assistant"]),
  content: v.union([v.string(), v.array(v.union([TextPart, ImagePart])), v.null()]),
});
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
  stream_options: v.optional(v.nullable(v.object({ include_usage: v.optional(v.boolean()) }))),
  logprobs: v.optional(v.nullable(v.boolean())),
  top_logprobs: v.optional(v.nullable(v.pipe(v.number(), v.integer(), v.minValue(0), v.maxValue(0, "top_logprobs is not supported (only the sampled token's log-prob)")))),
  n: v.optional(v.nullable(v.pipe(v.number(), v.literal(1, "n must be 1")))),
  return_token_ids: v.optional(v.boolean()),
});
type ChatRequest = v.InferOutput<typeof ChatRequest>;

export interface ServerOptions {
  engine: Engine;
  builder: ChatPromptBuilder;
  host?: string;
  port?: number;
}

class BadRequest extends Error {
  constructor(
    message: string,
    readonly param?: string,
  ) {
    super(message);
  }
}

export function startServer(opts: ServerOptions): ReturnType<typeof Bun.serve> {
  const client = new EngineClient(opts.engine, opts.builder);
  const modelName = opts.builder.modelName;
  const created = Math.floor(Date.now() / 1000);
  return Bun.serve({
    hostname: opts.host ?? "127.0.0.1",
    port: opts.port ?? 8000,
    // Long generations stream for minutes; Bun's default idle timeout would cut them.
    idleTimeout: 0,
    routes: {
      "/v1/models": {
        GET: () => Response.json({ object: "list", data: [{ id: modelName, object: "model", created, owned_by: "vagen" }] }),
      },
      "/v1/chat/completions": {
        POST: async (req) => {
          let body: ChatRequest;
          let messages: ChatMessage[];
          try {
            body = parseRequest(await req.json().catch(() => Promise.reject(new BadRequest("the body is not valid JSON"))));
            messages = body.messages.map(toChatMessage);
          } catch (e) {
            return errorResponse(e);
          }
          const sampling = toSampling(body);
          const id = `chatcmpl-${crypto.randomUUID().replaceAll("-", "")}`;
          if (body.stream) return streamResponse(client, messages, sampling, body, { id, modelName, signal: req.signal });
          try {
            const result = await client.generate(messages, sampling, { signal: req.signal });
            return Response.json(completionBody(result, body, { id, modelName, decodeToken: (t) => opts.builder.decode([t]) }));
          } catch (e) {
            return errorResponse(e);
          }
        },
      },
    },
    fetch: () => Response.json({ error: { message: "not found", type: "invalid_request_error" } }, { status: 404 }),
  });
}

function parseRequest(json: unknown): ChatRequest {
  const parsed = v.safeParse(ChatRequest, json);
  if (!parsed.success) {
    const issue = parsed.issues[0];
    const path = issue.path?.map((p) => String(p.key)).join(".") ?? "";
    throw new BadRequest(`${path ? `${path}: ` : ""}${issue.message}`, path || undefined);
  }
  return parsed.output;
}

function toChatMessage(m: v.InferOutput<typeof WireMessage>, index: number): ChatMessage {
  const content: ContentPart[] = [];
  if (typeof m.content === "string") content.push({ type: "text", text: m.content });
  else if (m.content) {
    m.content.forEach((part, j) => {
      if (part.type === "text") content.push({ type: "text", text: part.text });
      else content.push({ type: "image", image: decodeDataUrl(typeof part.image_url === "string" ? part.image_url : part.image_url.url, `messages.${index}.content.${j}`) });
    });
  }
  return { role: m.role, content };
}

function decodeDataUrl(url: string, param: string): RGBImage {
  const match = /^data:image\/png;base64,(.*)$/s.exec(url);
  if (!match) throw new BadRequest(`${param}.image_url.url: expected a PNG data URL (data:image/png;base64,...)`, param);
  try {
    return decodePng(Uint8Array.from(Buffer.from(match[1]!, "base64")));
  } catch (e) {
    throw new BadRequest(`${param}.image_url.url: not a decodable PNG (${(e as Error).message})`, param);
  }
}

function toSampling(body: ChatRequest): Partial<SamplingOptions> {
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

interface ResponseContext {
  id: string;
  modelName: string;
}

function tokenLogprob(token: string, logprob: number) {
  return { token, logprob, bytes: [...new TextEncoder().encode(token)], top_logprobs: [] };
}

function completionBody(result: GenerationResult, body: ChatRequest, ctx: ResponseContext & { decodeToken: (id: number) => string }) {
  return {
    id: ctx.id,
    object: "chat.completion",
    created: Math.floor(Date.now() / 1000),
    model: ctx.modelName,
    choices: [
      {
        index: 0,
        message: { role: "assistant", content: result.text },
        finish_reason: result.finishReason === "abort" ? "stop" : result.finishReason,
        logprobs: body.logprobs ? { content: result.tokenIds.map((t, i) => tokenLogprob(ctx.decodeToken(t), result.logprobs[i]!)) } : null,
        ...(body.return_token_ids ? { token_ids: result.tokenIds } : {}),
      },
    ],
    usage: usage(result),
  };
}

function usage(result: GenerationResult) {
  return {
    prompt_tokens: result.promptTokens,
    completion_tokens: result.tokenIds.length,
    total_tokens: result.promptTokens + result.tokenIds.length,
    prompt_tokens_details: { cached_tokens: result.cachedPromptTokens },
  };
}

function streamResponse(
  client: EngineClient,
  messages: ChatMessage[],
  sampling: Partial<SamplingOptions>,
  body: ChatRequest,
  ctx: ResponseContext & { signal: AbortSignal },
): Response {
  const encoder = new TextEncoder();
  const created = Math.floor(Date.now() / 1000);
  const chunk = (choice: Record<string, unknown>, extra: Record<string, unknown> = {}) =>
    encoder.encode(`data: ${JSON.stringify({ id: ctx.id, object: "chat.completion.chunk", created, model: ctx.modelName, choices: [{ index: 0, ...choice }], ...extra })}\n\n`);
  const decodeToken = (id: number) => client.builder.decode([id]);
  const stream = new ReadableStream<Uint8Array>({
    start: async (controller) => {
      // After the client goes away the stream is closed; late writes are dropped, never thrown.
      let open = true;
      const send = (bytes: Uint8Array) => {
        if (!open) return;
        try {
          controller.enqueue(bytes);
        } catch {
          open = false;
        }
      };
      send(chunk({ delta: { role: "assistant", content: "" }, logprobs: null, finish_reason: null }));
      try {
        const result = await client.generate(messages, sampling, {
          signal: ctx.signal,
          onToken: (ev) => {
            const logprobs = body.logprobs ? { content: [tokenLogprob(decodeToken(ev.tokenId), ev.logprob)] } : null;
            if (ev.textDelta || logprobs) {
              send(chunk({ delta: { content: ev.textDelta }, logprobs, finish_reason: null, ...(body.return_token_ids ? { token_ids: [ev.tokenId] } : {}) }));
            }
          },
        });
        send(chunk({ delta: {}, logprobs: null, finish_reason: result.finishReason }));
        if (body.stream_options?.include_usage) {
          send(encoder.encode(`data: ${JSON.stringify({ id: ctx.id, object: "chat.completion.chunk", created, model: ctx.modelName, choices: [], usage: usage(result) })}\n\n`));
        }
      } catch (e) {
        if ((e as Error).name !== "AbortError") {
          send(encoder.encode(`data: ${JSON.stringify({ error: { message: (e as Error).message, type: "server_error" } })}\n\n`));
        }
      }
      send(encoder.encode("data: [DONE]\n\n"));
      if (open) {
        try {
          controller.close();
        } catch {
          // already closed by the client
        }
      }
    },
    cancel: () => {
      // The request's signal aborts the generation; nothing else to release here.
    },
  });
  return new Response(stream, { headers: { "content-type": "text/event-stream", "cache-control": "no-cache", connection: "keep-alive" } });
}

function errorResponse(e: unknown): Response {
  if (e instanceof BadRequest) {
    return Response.json({ error: { message: e.message, type: "invalid_request_error", param: e.param ?? null, code: null } }, { status: 400 });
  }
  const err = e as Error;
  if (err.name === "AbortError") return new Response(null, { status: 499 });
  // Engine-side validation (prompt too long, bad sampling values) is the caller's to fix.
  const status = err.name === "VagenError" ? 400 : 500;
  return Response.json({ error: { message: err.message, type: status === 400 ? "invalid_request_error" : "server_error", param: null, code: null } }, { status });
}
