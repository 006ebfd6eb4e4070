import { afterEach, describe, expect, test } from "bun:test";
import { decodePng } from "../../src/core/png.ts";
import { InferenceError } from "../../src/clients/errors.ts";
import { OpenAICompatibleClient, type OpenAIClientOptions } from "../../src/clients/openai-client.ts";
import { buildRequestBody, parseCompletion, toWireMessage, type WirePart } from "../../src/clients/openai-wire.ts";
import { RequestGate } from "../../src/clients/request-gate.ts";
import { backoffDelay, DEFAULT_RETRY_POLICY, parseRetryAfter } from "../../src/clients/retry.ts";
import type { ChatMessage } from "../../src/core/chat.ts";
import { VagenError } from "../../src/core/errors.ts";
import { type FakeServer, type FakeServerOptions, startFakeOpenAIServer } from "./fake-openai-server.ts";
import { solidImage } from "./fixtures/line-env.ts";

const hello: ChatMessage[] = [{ role: "user", content: [{ type: "text", text: "hi" }] }];

describe("wire format", () => {
  test("images become PNG data URLs that decode to the same pixels; text-only messages are strings", () => {
    const image = solidImage(5, 2, 3);
    const wire = toWireMessage({ role: "user", content: [{ type: "text", text: "look " }, { type: "image", image }] });
    expect(Array.isArray(wire.content)).toBe(true);
    const parts = wire.content as WirePart[];
    expect(parts[0]).toEqual({ type: "text", text: "look " });
    const imagePart = parts[1]!;
    if (imagePart.type !== "image_url") throw new Error("expected an image_url part");
    const url = imagePart.image_url.url;
    expect(url.startsWith("data:image/png;base64,")).toBe(true);
    const decoded = decodePng(Buffer.from(url.slice("data:image/png;base64,".length), "base64"));
    expect(decoded).toEqual(image);
    expect(toWireMessage(hello[0]!)).toEqual({ role: "user", content: "hi" });
  });

  test("sampling params map to OpenAI names; extra body passes through", () => {
    const body = buildRequestBody("m", hello, { temperature: 0, topP: 0.9, maxTokens: 7, stop: ["</answer>"], seed: 3 }, { top_k: 5 });
    expect(body).toEqual({ model: "m", messages: [{ role: "user", content: "hi" }], temperature: 0, top_p: 0.9, max_tokens: 7, stop: ["</answer>"], seed: 3, top_k: 5 });
  });

  test("parses text, finish reason, usage and logprobs; rejects bodies without choices", () => {
    const c = parseCompletion({
      choices: [{ message: { content: "ok" }, finish_reason: "length", logprobs: { content: [{ logprob: -0.5 }, { logprob: -1 }] } }],
      usage: { prompt_tokens: 3, completion_tokens: 2 },
    });
    expect(c).toEqual({ text: "ok", finishReason: "length", usage: { promptTokens: 3, completionTokens: 2 }, logprobs: [-0.5, -1] });
    expect(parseCompletion({ choices: [{ message: { content: null } }] }).text).toBe("");
    const withIds = parseCompletion({
      choices: [{ message: { content: "ok" }, logprobs: { content: [{ token: "token_id:151", logprob: -0.25 }, { token: "token_id:7", logprob: -2 }] } }],
    });
    expect(withIds.tokenIds).toEqual([151, 7]);
    expect(withIds.logprobs).toEqual([-0.25, -2]);
    expect(() => parseCompletion({ choices: [] })).toThrow("no choices");
  });
});

describe("retry timing", () => {
  const policy = { ...DEFAULT_RETRY_POLICY, minBackoffMs: 100, maxBackoffMs: 1000, jitter: 0.25 };

  test("doubles from the minimum, caps at the maximum, adds at most 25% jitter", () => {
    expect(backoffDelay({ ...policy, random: () => 0 }, 1)).toBe(100);
    expect(backoffDelay({ ...policy, random: () => 0 }, 3)).toBe(400);
    expect(backoffDelay({ ...policy, random: () => 0 }, 10)).toBe(1000);
    expect(backoffDelay({ ...policy, random: () => 0.999 }, 2)).toBeCloseTo(200 * 1.24975);
  });

  test("Retry-After wins over backoff, capped by maxRetryAfterMs", () => {
    expect(backoffDelay(policy, 1, 2500)).toBe(2500);
    expect(backoffDelay({ ...policy, maxRetryAfterMs: 1500 }, 1, 2500)).toBe(1500);
  });

  test("Retry-After as seconds or as an HTTP date", () => {
    expect(parseRetryAfter("2")).toBe(2000);
    expect(parseRetryAfter("0.25")).toBe(250);
    expect(parseRetryAfter(null)).toBeUndefined();
    expect(parseRetryAfter("soon")).toBeUndefined();
    const now = Date.parse("2026-11-30T12:00:00Z");
    expect(parseRetryAfter("Mon, 30 Nov 2026 12:00:05 GMT", now)).toBe(5000);
  });
});

describe("request gate", () => {
  test("never lets more than maxConcurrency requests in, and serves waiters in order", async () => {
    const gate = new RequestGate({ maxConcurrency: 2 });
    let inside = 0;
    let peak = 0;
    const order: number[] = [];
    await Promise.all(
      Array.from({ length: 6 }, async (_, i) => {
        const release = await gate.acquire();
        inside++;
        peak = Math.max(peak, inside);
        order.push(i);
        await Bun.sleep(2);
        inside--;
        release();
      }),
    );
    expect(peak).toBe(2);
    expect(order).toEqual([0, 1, 2, 3, 4, 5]);
    expect(gate.inFlight).toBe(0);
  });

  test("a waiter can be aborted and gives its place up", async () => {
    const gate = new RequestGate({ maxConcurrency: 1 });
    const release = await gate.acquire();
    const controller = new AbortController();
    const waiting = gate.acquire(controller.signal);
    controller.abort();
    await expect(waiting).rejects.toMatchObject({ name: "AbortError" });
    release();
    expect(gate.inFlight).toBe(0);
    (await gate.acquire())();
  });

  test("requests per minute: the third start in a window waits until the oldest leaves it", async () => {
    let clock = 0;
    const waits: number[] = [];
    const gate = new RequestGate({
      maxConcurrency: 10,
      requestsPerMinute: 2,
      now: () => clock,
      sleep: async (ms) => {
        waits.push(ms);
        clock += ms;
      },
    });
    (await gate.acquire())();
    clock = 1000;
    (await gate.acquire())();
    (await gate.acquire())();
    expect(waits).toEqual([59_000]);
    expect(clock).toBe(60_000);
  });
});

describe("OpenAI-compatible HTTP client", () => {
  let server: FakeServer | undefined;
  afterEach(async () => {
    await server?.stop();
    server = undefined;
  });

  const fastRetry = { minBackoffMs: 1, maxBackoffMs: 5, maxRetryAfterMs: 50 };
  function client(extra: Partial<OpenAIClientOptions> = {}): OpenAICompatibleClient {
    return new OpenAICompatibleClient({ baseUrl: server!.baseUrl, model: "test-model", timeoutMs: 2000, maxConcurrency: 4, retry: fastRetry, ...extra });
  }
  function serve(options: Partial<FakeServerOptions>): void {
    server = startFakeOpenAIServer({ answer: () => "pong", ...options });
  }

  test("retries 429 (honouring Retry-After) and 500, then returns the completion", async () => {
    serve({ fault: (n) => (n === 0 ? { status: 429, retryAfterS: 0.02 } : n === 1 ? { status: 500 } : undefined) });
    const retries: { delayMs: number }[] = [];
    const c = await client({ onRetry: (e) => retries.push(e) }).create(hello, { maxTokens: 5 });
    expect(client().description).toBe(`test-model @ ${server!.baseUrl}`);
    expect(c.text).toBe("pong");
    expect(c.finishReason).toBe("stop");
    expect(server!.requests.map((r) => r.status)).toEqual([429, 500, 200]);
    expect(retries[0]!.delayMs).toBe(20);
    expect(server!.requests[2]!.body.max_tokens).toBe(5);
  });

  test("does not retry a 400, and says what the server said", async () => {
    serve({ fault: () => ({ status: 400 }) });
    const err = await client().create(hello, {}).catch((e) => e);
    expect(err).toBeInstanceOf(InferenceError);
    expect(err.status).toBe(400);
    expect(err.message).toContain("injected fault 400");
    expect(server!.requests.length).toBe(1);
  });

  test("gives up after maxRetries and reports how many attempts it made", async () => {
    serve({ fault: () => ({ status: 503 }) });
    const err = await client({ retry: { ...fastRetry, maxRetries: 2 } }).create(hello, {}).catch((e) => e);
    expect(err.message).toContain("gave up after 3 attempts");
    expect(server!.requests.length).toBe(3);
  });

  test("a slow answer hits the per-attempt timeout and the retry succeeds", async () => {
    serve({ fault: (n) => (n === 0 ? { delayMs: 400 } : undefined) });
    const retries: string[] = [];
    const c = await client({ timeoutMs: 100, onRetry: (e) => retries.push(e.reason) }).create(hello, {});
    expect(c.text).toBe("pong");
    expect(retries.length).toBe(1);
    expect(retries[0]).toContain("no complete response within 100 ms");
  });

  test("a network error (nothing listening) is retried, then reported with a hint", async () => {
    serve({});
    const baseUrl = server!.baseUrl;
    await server!.stop();
    server = undefined;
    const c = new OpenAICompatibleClient({ baseUrl, model: "m", timeoutMs: 500, maxConcurrency: 1, retry: { ...fastRetry, maxRetries: 1 } });
    const err = await c.create(hello, {}).catch((e) => e);
    expect(err).toBeInstanceOf(InferenceError);
    expect(err.message).toContain("gave up after 2 attempts");
    expect(err.hint).toContain("base_url");
  });

  test("a server that stays unreachable: the first requests retry to the end, the later ones fail at once", async () => {
    serve({});
    const baseUrl = server!.baseUrl;
    await server!.stop();
    server = undefined;
    const retries: number[] = [];
    const c = new OpenAICompatibleClient({ baseUrl, model: "m", timeoutMs: 500, maxConcurrency: 1, retry: { ...fastRetry, maxRetries: 3 }, onRetry: (e) => retries.push(e.retry) });
    for (let i = 0; i < 2; i++) expect((await c.create(hello, {}).catch((e) => e)).message).toContain("gave up after 4 attempts");
    expect(retries.length).toBe(6);
    const third = await c.create(hello, {}).catch((e) => e);
    expect(third).toBeInstanceOf(InferenceError);
    expect(third.message).toContain("3 requests in a row could not reach the server: not retrying");
    expect(retries.length).toBe(6);
  });

  test("sends the key from the named env var and never puts it in an error, even when the server echoes it", async () => {
    const secret = "sk-test-1234567890";
    server = startFakeOpenAIServer({ answer: () => "", fault: () => ({ status: 401, body: `Incorrect API key provided: ${secret}` }) });
    const err = await client({ apiKeyEnv: "VAGEN_TEST_KEY", env: { VAGEN_TEST_KEY: secret } }).create(hello, {}).catch((e) => e);
    expect(server!.requests[0]!.authorization).toBe(`Bearer ${secret}`);
    expect(err.message).toContain("Incorrect API key provided: [api key]");
    expect(`${err.message} ${err.hint}`).not.toContain(secret);
    expect(err.hint).toContain("VAGEN_TEST_KEY");
  });

  test("credentials in the base URL stay out of descriptions", () => {
    const c = new OpenAICompatibleClient({ baseUrl: "https://user:pw@example.test/v1?key=abc", model: "m", timeoutMs: 1, maxConcurrency: 1 });
    expect(c.description).toBe("m @ https://example.test/v1");
  });

  test("a missing key variable is a clear config error", () => {
    serve({});
    expect(() => client({ apiKeyEnv: "VAGEN_TEST_MISSING_KEY", env: {} })).toThrow(VagenError);
    expect(() => client({ apiKeyEnv: "VAGEN_TEST_MISSING_KEY", env: {} })).toThrow("VAGEN_TEST_MISSING_KEY");
  });

  test("aborting during a retry wait rejects at once with an AbortError", async () => {
    serve({ fault: () => ({ status: 429, retryAfterS: 30 }) });
    const controller = new AbortController();
    const pending = client({ retry: { ...fastRetry, maxRetryAfterMs: 30_000 }, onRetry: () => controller.abort() }).create(hello, {}, { signal: controller.signal });
    await expect(pending).rejects.toMatchObject({ name: "AbortError" });
  });

  test("the concurrency limit holds across parallel callers", async () => {
    let inFlight = 0;
    let peak = 0;
    server = startFakeOpenAIServer({
      // fault() runs when a request arrives, answer() just before its response leaves.
      fault: () => {
        inFlight++;
        peak = Math.max(peak, inFlight);
        return { delayMs: 20 };
      },
      answer: () => {
        inFlight--;
        return "x";
      },
    });
    const c = client({ maxConcurrency: 2 });
    await Promise.all(Array.from({ length: 6 }, () => c.create(hello, {})));
    expect(server.requests.length).toBe(6);
    expect(peak).toBe(2);
  });
});
