/**
 * An OpenAI-compatible HTTP API over the in-process engine (`vagen serve`):
 *
 *   GET  /v1/models
 *   POST /v1/chat/completions   text and image_url (PNG data URLs) content, streaming (SSE)
 *                               and non-streaming, logprobs of the sampled tokens
 *
 * Extensions beyond the OpenAI schema, all optional: `top_k`, `stop_token_ids`,
 * `ignore_eos`, `return_token_ids` (adds the generated ids to each choice) and vLLM's
 * `return_tokens_as_token_ids`. Parameters the engine cannot honour are refused with a
 * 400 naming them (request.ts). Multi-turn conversations reuse their KV cache: a
 * request whose messages continue an earlier answer's conversation continues that engine
 * session.
 *
 * Guard rails, in the order a request meets them: the API key (401), the JSON content
 * type (415), the body size, counted as it arrives (413), the parameters (400), the text
 * size against the prompt-token limit before tokenizing and the images' pixel counts
 * before decoding (400), then the prompt's token count (400). Every request is logged in
 * one line; every 5xx with its cause.
 */
import { EngineClient } from "../clients/engine-client.ts";
import { VagenError } from "../core/errors.ts";
import type { ChatPromptBuilder } from "../engine/chat.ts";
import type { Engine } from "../engine/engine.ts";
import { bearerGuard } from "./auth.ts";
import { badRequest, errorJson, HttpError, readJsonBody, requireJsonContentType } from "./http.ts";
import { beginRequest, type RequestLogEntry, type RequestLogOptions } from "./log.ts";
import { checkModelName, parseChatRequest, toChatMessages, toSampling, type PromptSizeLimits } from "./request.ts";
import { completionBody, streamResponse, type ResponseContext } from "./response.ts";

export interface ServeLimits {
  /** Largest request body in bytes (413 beyond it). */
  maxBodyBytes: number;
  /** Most tokens a prompt may have, image tokens included (default: what a KV slot holds, less one to generate). */
  maxPromptTokens?: number;
  /** Most pixels one image may have, read from its PNG header before decoding. */
  maxImagePixels: number;
  /** Most pixels of all one request's images together. */
  maxRequestPixels: number;
}

export const DEFAULT_SERVE_LIMITS: Readonly<ServeLimits> = {
  maxBodyBytes: 32 * 2 ** 20,
  // 4096x4096: four times what Qwen2.5-VL's processor keeps by default (max_pixels 1003520).
  maxImagePixels: 4096 * 4096,
  maxRequestPixels: 4 * 4096 * 4096,
};

export interface ServerOptions {
  engine: Engine;
  builder: ChatPromptBuilder;
  host?: string;
  port?: number;
  /** Names a request's `model` may use (default: the builder's model name). */
  servedModelNames?: readonly string[];
  /** Required as `Authorization: Bearer <key>` on every request when set. */
  apiKey?: string;
  limits?: Partial<ServeLimits>;
  /** The request log (default: stderr, every request). */
  log?: Partial<RequestLogOptions>;
}

type Handler = (req: Request, log: RequestLogEntry) => Response | Promise<Response>;

export function startServer(opts: ServerOptions): ReturnType<typeof Bun.serve> {
  const limits = { ...DEFAULT_SERVE_LIMITS, ...opts.limits };
  const builder = withPromptTokenLimit(opts.builder, resolveMaxPromptTokens(opts.engine, limits.maxPromptTokens));
  const promptLimits: PromptSizeLimits = { ...limits, maxPromptTokens: builder.maxPromptTokens, longestTokenBytes: longestTokenBytes(opts.builder, opts.engine) };
  const client = new EngineClient(opts.engine, builder);
  const modelName = opts.servedModelNames?.[0] ?? opts.builder.modelName;
  const servedNames = opts.servedModelNames ?? [modelName];
  const tokenBytes = opts.builder.tokenBytes ?? ((id: number) => new TextEncoder().encode(opts.builder.decode([id])));
  const created = Math.floor(Date.now() / 1000);
  const logOptions: RequestLogOptions = { write: (line) => process.stderr.write(line), ...opts.log };
  const authorize = bearerGuard(opts.apiKey);

  const handle =
    (handler: Handler) =>
    async (req: Request): Promise<Response> => {
      const log = beginRequest(logOptions, req);
      const denied = authorize?.(req);
      if (denied) {
        log.end(denied.status);
        return denied;
      }
      try {
        const res = await handler(req, log);
        if (!log.deferred) log.end(res.status);
        return res;
      } catch (e) {
        const res = errorResponse(e);
        log.end(res.status, res.status >= 500 ? e : undefined);
        return res;
      }
    };

  const chatCompletions: Handler = async (req, log) => {
    requireJsonContentType(req);
    const body = parseChatRequest(await readJsonBody(req, limits.maxBodyBytes));
    checkModelName(body.model, servedNames);
    const messages = toChatMessages(body.messages, promptLimits);
    const sampling = toSampling(body);
    const ctx: ResponseContext = {
      id: `chatcmpl-${crypto.randomUUID().replaceAll("-", "")}`,
      modelName,
      body,
      decodeToken: (id) => opts.builder.decode([id]),
      tokenBytes,
    };
    if (body.stream) return streamResponse(client, messages, sampling, { ...ctx, signal: req.signal, log });
    const result = await client.generate(messages, sampling, { signal: req.signal });
    log.setTokens({ promptTokens: result.promptTokens, completionTokens: result.tokenIds.length });
    return Response.json(completionBody(result, ctx));
  };

  return Bun.serve({
    hostname: opts.host ?? "127.0.0.1",
    port: opts.port ?? 8000,
    // Long generations stream for minutes; Bun's default idle timeout would cut them.
    idleTimeout: 0,
    // The chat handler counts the body as it arrives and answers 413 with the limit in the
    // message; Bun's own cap would answer first, with an empty 413 and before the API key
    // is checked. Bodies nobody reads are not buffered.
    maxRequestBodySize: Number.MAX_SAFE_INTEGER,
    routes: {
      "/v1/models": {
        GET: handle(() =>
          Response.json({ object: "list", data: servedNames.map((id) => ({ id, object: "model", created, owned_by: "vagen" })) }),
        ),
      },
      "/v1/chat/completions": { POST: handle(chatCompletions) },
    },
    fetch: handle(() => errorJson(404, "not found", { code: "not_found" })),
  });
}

/** The prompt-token limit: the configured one, or what a KV slot holds less one token to generate. */
function resolveMaxPromptTokens(engine: Engine, configured: number | undefined): number {
  const fits = engine.capacity.slotTokens - 1;
  if (configured === undefined) return fits;
  if (!Number.isInteger(configured) || configured < 1 || configured > fits) {
    throw new VagenError(
      `--max-prompt-tokens: expected an integer from 1 to ${fits} (a KV slot holds ${fits + 1} tokens, prompt and answer), got ${configured}`,
      "raise --max-seq-len (and --kv-cache-gib) for longer prompts",
    );
  }
  return configured;
}

/** A builder whose prompts over `maxPromptTokens` tokens are refused with a 400. */
function withPromptTokenLimit(builder: ChatPromptBuilder, maxPromptTokens: number): ChatPromptBuilder & { maxPromptTokens: number } {
  return {
    maxPromptTokens,
    modelName: builder.modelName,
    eosTokenIds: builder.eosTokenIds,
    tokenBytes: builder.tokenBytes,
    decode: (ids) => builder.decode(ids),
    buildPrompt(messages) {
      const prompt = builder.buildPrompt(messages);
      if (prompt.tokenIds.length > maxPromptTokens) {
        throw badRequest(
          `the prompt has ${prompt.tokenIds.length} tokens (images included); this server accepts at most ${maxPromptTokens} (--max-prompt-tokens)`,
          "messages",
          "context_length_exceeded",
        );
      }
      return prompt;
    },
  };
}

/**
 * UTF-8 bytes of the vocabulary's longest token, which bounds how much text a prompt of
 * n tokens can hold, so oversized text is refused before it is tokenized.
 */
function longestTokenBytes(builder: ChatPromptBuilder, engine: Engine): number {
  const encoder = new TextEncoder();
  const bytesOf = builder.tokenBytes ?? ((id: number) => encoder.encode(builder.decode([id])));
  let longest = 1;
  for (let id = 0; id < engine.capacity.vocabSize; id++) longest = Math.max(longest, bytesOf(id).length);
  return longest;
}

function errorResponse(e: unknown): Response {
  if (e instanceof HttpError) return errorJson(e.status, e.message, e.detail);
  const err = e instanceof Error ? e : new Error(String(e));
  // The client went away; nobody reads this answer (nginx's "client closed request").
  if (err.name === "AbortError") return new Response(null, { status: 499 });
  // Engine-side validation (prompt too long for a slot, bad sampling values) is the caller's to fix.
  if (err instanceof VagenError) return errorJson(400, err.message);
  return errorJson(500, `internal error: ${err.message}`);
}
