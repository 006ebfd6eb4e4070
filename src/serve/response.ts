/**
 * Chat-completion answers in OpenAI's wire shapes: the whole completion, or a stream of
 * server-sent-event chunks as tokens arrive.
 */
import type { EngineClient } from "../clients/engine-client.ts";
import type { ChatMessage } from "../core/chat.ts";
import type { ChatRequest } from "./request.ts";
import type { RequestLogEntry } from "./log.ts";
import type { GenerationResult, SamplingOptions } from "../engine/types.ts";

/** How one request's answer is written. */
export interface ResponseContext {
  id: string;
  modelName: string;
  body: ChatRequest;
  /** The text of one generated id on its own (special tokens give ""). */
  decodeToken: (id: number) => string;
  /** The raw bytes one generated id contributes to the text. */
  tokenBytes: (id: number) => Uint8Array;
}

/**
 * One entry of `logprobs.content`. `bytes` are the token's own bytes: a byte-level token
 * that ends inside a UTF-8 character decodes alone to U+FFFD, but its bytes put next to
 * the following tokens' give back the exact text.
 */
export function tokenLogprob(tokenId: number, logprob: number, ctx: ResponseContext) {
  const token = ctx.body.return_tokens_as_token_ids ? `token_id:${tokenId}` : ctx.decodeToken(tokenId);
  return { token, logprob, bytes: Array.from(ctx.tokenBytes(tokenId)), top_logprobs: [] };
}

export function usage(result: GenerationResult) {
  return {
    prompt_tokens: result.promptTokens,
    completion_tokens: result.tokenIds.length,
    total_tokens: result.promptTokens + result.tokenIds.length,
    prompt_tokens_details: { cached_tokens: result.cachedPromptTokens },
  };
}

export function completionBody(result: GenerationResult, ctx: ResponseContext) {
  const { body } = ctx;
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
        logprobs: body.logprobs ? { content: result.tokenIds.map((t, i) => tokenLogprob(t, result.logprobs[i]!, ctx)) } : null,
        ...(body.return_token_ids ? { token_ids: result.tokenIds } : {}),
      },
    ],
    usage: usage(result),
  };
}

/**
 * Stream the generation as SSE chunks. The response is returned once the first token is
 * out, so a request that fails before generating (a prompt too long, a bad stop id) still
 * gets its 4xx or 5xx status instead of a 200 with an error event. The stream ends the
 * request's log entry: 200 with token counts when it completes, 499 when the client went
 * away, the cause when it failed midway.
 */
export async function streamResponse(
  client: EngineClient,
  messages: ChatMessage[],
  sampling: Partial<SamplingOptions>,
  ctx: ResponseContext & { signal: AbortSignal; log: RequestLogEntry },
): Promise<Response> {
  const { body } = ctx;
  const encoder = new TextEncoder();
  const created = Math.floor(Date.now() / 1000);
  const event = (payload: unknown) => encoder.encode(`data: ${JSON.stringify(payload)}\n\n`);
  const chunk = (choice: Record<string, unknown>) =>
    event({ id: ctx.id, object: "chat.completion.chunk", created, model: ctx.modelName, choices: [{ index: 0, ...choice }] });

  let controller!: ReadableStreamDefaultController<Uint8Array>;
  // After the client goes away the stream is closed; late writes are dropped, never thrown.
  let open = true;
  const stream = new ReadableStream<Uint8Array>({
    start: (c) => {
      controller = c;
    },
    cancel: () => {
      // The request's signal aborts the generation; nothing else to release here.
      open = false;
    },
  });
  const send = (bytes: Uint8Array) => {
    if (!open) return;
    try {
      controller.enqueue(bytes);
    } catch {
      open = false;
    }
  };
  const close = () => {
    send(encoder.encode("data: [DONE]\n\n"));
    if (!open) return;
    open = false;
    try {
      controller.close();
    } catch {
      // already closed by the client
    }
  };

  send(chunk({ delta: { role: "assistant", content: "" }, logprobs: null, finish_reason: null }));
  let generating!: () => void;
  const firstToken = new Promise<void>((resolve) => (generating = resolve));
  const generation = client.generate(messages, sampling, {
    signal: ctx.signal,
    onToken: (ev) => {
      generating();
      const logprobs = body.logprobs ? { content: [tokenLogprob(ev.tokenId, ev.logprob, ctx)] } : null;
      if (ev.textDelta || logprobs) {
        send(chunk({ delta: { content: ev.textDelta }, logprobs, finish_reason: null, ...(body.return_token_ids ? { token_ids: [ev.tokenId] } : {}) }));
      }
    },
  });
  // A rejection before the first token propagates: the caller answers it with a status.
  await Promise.race([firstToken, generation]);

  ctx.log.deferred = true;
  generation.then(
    (result) => {
      send(chunk({ delta: {}, logprobs: null, finish_reason: result.finishReason === "abort" ? "stop" : result.finishReason }));
      if (body.stream_options?.include_usage) {
        send(event({ id: ctx.id, object: "chat.completion.chunk", created, model: ctx.modelName, choices: [], usage: usage(result) }));
      }
      close();
      ctx.log.setTokens({ promptTokens: result.promptTokens, completionTokens: result.tokenIds.length });
      ctx.log.end(200);
    },
    (e: unknown) => {
      if ((e as Error).name === "AbortError") ctx.log.end(499);
      else {
        // The 200 status is sent already; the error travels as an event, and to the log.
        send(event({ error: { message: (e as Error).message, type: "server_error" } }));
        ctx.log.end(200, e);
      }
      close();
    },
  );
  return new Response(stream, { headers: { "content-type": "text/event-stream", "cache-control": "no-cache", connection: "keep-alive" } });
}
