/**
 * A small OpenAI-compatible chat-completions server for tests, on 127.0.0.1 with an OS
 * port. What it answers is a function of the request; faults (HTTP errors, slow answers)
 * are a function of the request number, so every scenario is deterministic.
 */

export interface WireRequest {
  model: string;
  messages: { role: string; content: string | ({ type: "text"; text: string } | { type: "image_url"; image_url: { url: string } })[] }[];
  max_tokens?: number;
  temperature?: number;
  seed?: number;
  [key: string]: unknown;
}

export interface Fault {
  /** Answer with this HTTP status instead of a completion. */
  status?: number;
  /** Retry-After header value, in seconds. */
  retryAfterS?: number;
  /** Error body text (default: a JSON error object naming the status). */
  body?: string;
  /** Wait this long before answering (to trip client timeouts). */
  delayMs?: number;
}

export interface FakeServerOptions {
  /** The assistant text for a request. */
  answer: (request: WireRequest) => string;
  /** A fault for request number `n` (0-based, in arrival order), or undefined to answer normally. */
  fault?: (n: number, request: WireRequest) => Fault | undefined;
}

export interface RecordedRequest {
  body: WireRequest;
  authorization: string | null;
  /** The HTTP status the server answered with. */
  status: number;
}

export interface FakeServer {
  /** Base URL ending in /v1, as a client config takes it. */
  baseUrl: string;
  requests: RecordedRequest[];
  stop(): Promise<void>;
}

export function startFakeOpenAIServer(options: FakeServerOptions): FakeServer {
  const requests: RecordedRequest[] = [];
  let counter = 0;
  const server = Bun.serve({
    hostname: "127.0.0.1",
    port: 0,
    async fetch(req) {
      const url = new URL(req.url);
      if (req.method !== "POST" || url.pathname !== "/v1/chat/completions") return new Response("not found", { status: 404 });
      const body = (await req.json()) as WireRequest;
      const n = counter++;
      const record: RecordedRequest = { body, authorization: req.headers.get("authorization"), status: 200 };
      requests.push(record);
      const fault = options.fault?.(n, body);
      if (fault?.delayMs) await Bun.sleep(fault.delayMs);
      if (fault?.status) {
        record.status = fault.status;
        const headers: Record<string, string> = { "content-type": "application/json" };
        if (fault.retryAfterS !== undefined) headers["retry-after"] = String(fault.retryAfterS);
        const text = fault.body ?? JSON.stringify({ error: { message: `injected fault ${fault.status}` } });
        return new Response(text, { status: fault.status, headers });
      }
      const text = options.answer(body);
      return Response.json({
        id: `chatcmpl-${n}`,
        object: "chat.completion",
        model: body.model,
        choices: [{ index: 0, message: { role: "assistant", content: text }, finish_reason: "stop" }],
        usage: { prompt_tokens: JSON.stringify(body.messages).length, completion_tokens: text.length, total_tokens: 0 },
      });
    },
  });
  return {
    baseUrl: `http://127.0.0.1:${server.port}/v1`,
    requests,
    stop: () => server.stop(true),
  };
}

/** The text of the last user message of a request (image parts left out). */
export function lastUserText(request: WireRequest): string {
  const user = [...request.messages].reverse().find((m) => m.role === "user");
  if (!user) return "";
  if (typeof user.content === "string") return user.content;
  return user.content.map((p) => (p.type === "text" ? p.text : "")).join("");
}

/** Every image data URL in a request, in order. */
export function imageUrls(request: WireRequest): string[] {
  return request.messages.flatMap((m) => (typeof m.content === "string" ? [] : m.content.flatMap((p) => (p.type === "image_url" ? [p.image_url.url] : []))));
}
