/**
 * `vagen serve`'s guard rails, in-process over the tiny fixture: size limits before
 * parsing, tokenizing and decoding; the API key; the JSON content type; OpenAI parameters
 * that are honoured or refused by name; the request log.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import OpenAI from "openai";
import { createImage } from "../../envs/_common/image.ts";
import { pngDataUrl } from "../../src/core/png.ts";
import type { LoadedEngine } from "../../src/engine/load.ts";
import { checkExposure, isLoopback } from "../../src/serve/auth.ts";
import { readImagePart } from "../../src/serve/images.ts";
import { dataUrl, pngHeaderOnly } from "../abuse/serve-png.ts";
import { hello, loadFixtureEngine, post, startTestServer, type TestServer } from "./serve-fixture.ts";

let loaded: LoadedEngine;
let open: TestServer;
let chat: string;

beforeAll(() => {
  loaded = loadFixtureEngine();
  open = startTestServer(loaded);
  chat = `${open.url}/v1/chat/completions`;
});
afterAll(async () => {
  open.stop();
  await loaded.close();
});

const imagePart = (url: string, detail?: string) => ({ type: "image_url", image_url: detail ? { url, detail } : { url } });

describe("sizes are checked before the work that grows with them", () => {
  test("a 1.2 MB text part is a 400 with the numbers, not a stack overflow, and the server keeps serving", async () => {
    // Before: the tokens of the rendered text were spread into push() and overflowed the stack (500).
    const res = await post(chat, { messages: [{ role: "user", content: [{ type: "text", text: "ab ".repeat(400_000) }] }] });
    expect(res.status).toBe(400);
    expect(res.body.error.code).toBe("context_length_exceeded");
    // 511 prompt tokens (a 512-token slot less one) of at most 6 bytes each (the fixture vocabulary's longest).
    expect(res.body.error.message).toContain("1200000 bytes of text");
    expect(res.body.error.message).toContain("at most 511 tokens");
    expect((await post(chat, hello())).status).toBe(200);
  });

  test("a prompt over --max-prompt-tokens is a 400 naming both counts", async () => {
    // "hi" renders to 43 tokens with the template's default system prompt.
    const small = startTestServer(loaded, { limits: { maxPromptTokens: 50 } });
    try {
      const res = await post(`${small.url}/v1/chat/completions`, hello({ messages: [{ role: "user", content: "one two three four five six seven eight nine ten ".repeat(3) }] }));
      expect(res.status).toBe(400);
      expect(res.body.error.message).toMatch(/the prompt has \d+ tokens \(images included\); this server accepts at most 50/);
      expect((await post(`${small.url}/v1/chat/completions`, hello({ messages: [{ role: "user", content: "hi" }] }))).status).toBe(200);
    } finally {
      small.stop();
    }
  });

  test("--max-prompt-tokens beyond what a KV slot holds is refused at start", () => {
    expect(() => startTestServer(loaded, { limits: { maxPromptTokens: 10_000 } })).toThrow(/expected an integer from 1 to 511/);
  });

  describe("bodies over the limit get a 413 with the limit in it", () => {
    let small: TestServer;
    beforeAll(() => {
      small = startTestServer(loaded, { limits: { maxBodyBytes: 64 * 1024 } });
    });
    afterAll(() => small.stop());

    test("declared by Content-Length", async () => {
      const res = await post(`${small.url}/v1/chat/completions`, hello({ messages: [{ role: "user", content: "x".repeat(100_000) }] }));
      expect(res.status).toBe(413);
      expect(res.body.error.message).toMatch(/the request body is \d+ bytes; this server accepts at most 65536/);
    });

    test("sent chunked, counted as it arrives, and refused before the end", async () => {
      const piece = new TextEncoder().encode(`{"messages":[{"role":"user","content":"${"x".repeat(16 * 1024)}`);
      let sent = 0;
      const body = new ReadableStream<Uint8Array>({
        pull(controller) {
          // An endless body: only a server that stops reading can answer it.
          sent += piece.length;
          controller.enqueue(piece);
        },
      });
      const res = await fetch(`${small.url}/v1/chat/completions`, { method: "POST", headers: { "content-type": "application/json" }, body });
      expect(res.status).toBe(413);
      expect(((await res.json()) as { error: { message: string } }).error.message).toContain("more than 65536");
      expect(sent).toBeLessThan(10 * 1024 * 1024);
    });
  });

  test("a PNG whose header claims 16000x16000 is refused before decoding", async () => {
    // Header only: had it been decoded, pngjs would fail on the missing data instead.
    const res = await post(chat, hello({ messages: [{ role: "user", content: [imagePart(dataUrl(pngHeaderOnly(16000, 16000)))] }] }));
    expect(res.status).toBe(400);
    expect(res.body.error.param).toBe("messages.0.content.0");
    expect(res.body.error.message).toContain("16000x16000 = 256000000 pixels");
    expect(res.body.error.message).toContain(`at most ${4096 * 4096} per image`);
  });

  test("images within the per-image limit but over the request's pixel budget are refused together", async () => {
    const small = startTestServer(loaded, { limits: { maxImagePixels: 64 * 64, maxRequestPixels: 100 * 64 } });
    try {
      const img = pngDataUrl(createImage(64, 64, [10, 20, 30]));
      const url = `${small.url}/v1/chat/completions`;
      const one = await post(url, hello({ messages: [{ role: "user", content: [imagePart(img), { type: "text", text: "?" }] }] }));
      expect(one.status).toBe(200);
      const two = await post(url, hello({ messages: [{ role: "user", content: [imagePart(img), imagePart(img)] }] }));
      expect(two.status).toBe(400);
      expect(two.body.error.message).toContain("2 image(s) hold 8192 pixels together; this server accepts at most 6400 per request");
    } finally {
      small.stop();
    }
  });

  test("an image part is sized from its header by core's PNG check; what is not a PNG is a 400", () => {
    const limits = { maxImagePixels: 1 << 20, maxRequestPixels: 1 << 21 };
    const part = readImagePart(dataUrl(pngHeaderOnly(640, 480)), "messages.0.content.0", limits);
    expect([part.width, part.height]).toEqual([640, 480]);
    const gif = `data:image/png;base64,${Buffer.from("GIF89a and some more bytes here").toString("base64")}`;
    expect(() => readImagePart(gif, "messages.0.content.0", limits)).toThrow("not a PNG image (no PNG signature)");
  });
});

describe("API key", () => {
  let locked: TestServer;
  beforeAll(() => {
    locked = startTestServer(loaded, { apiKey: "sk-test-123" });
  });
  afterAll(() => locked.stop());

  test("requests without the key, or with a wrong one, get OpenAI's 401", async () => {
    const attempts: Record<string, string>[] = [{}, { authorization: "Bearer sk-wrong" }, { authorization: "sk-test-123" }];
    for (const headers of attempts) {
      const res = await post(`${locked.url}/v1/chat/completions`, hello(), headers);
      expect(res.status).toBe(401);
      expect(res.body.error).toMatchObject({ type: "invalid_request_error", code: "invalid_api_key" });
      expect(JSON.stringify(res.body)).not.toContain("sk-");
    }
    expect((await fetch(`${locked.url}/v1/models`)).status).toBe(401);
  });

  test("the key as a Bearer token works with the openai client", async () => {
    const client = new OpenAI({ baseURL: `${locked.url}/v1`, apiKey: "sk-test-123", maxRetries: 0 });
    expect((await client.models.list()).data.map((m) => m.id)).toEqual([loaded.builder.modelName]);
    const res = await client.chat.completions.create({ model: loaded.builder.modelName, messages: [{ role: "user", content: "hi" }], max_tokens: 2 });
    expect(res.choices[0]!.finish_reason).toBeDefined();
    expect(locked.logs.join("")).not.toContain("sk-test-123");
  });

  test("an address other machines reach needs a key or --insecure", () => {
    expect(isLoopback("127.0.0.1")).toBe(true);
    expect(isLoopback("127.8.9.10")).toBe(true);
    expect(isLoopback("localhost")).toBe(true);
    expect(isLoopback("[::1]")).toBe(true);
    expect(isLoopback("0.0.0.0")).toBe(false);
    expect(isLoopback("::")).toBe(false);
    expect(isLoopback("192.168.1.5")).toBe(false);
    expect(() => checkExposure("0.0.0.0", undefined, false)).toThrow(/--host 0.0.0.0 is reachable from other machines and no API key is set/);
    expect(() => checkExposure("0.0.0.0", "key", false)).not.toThrow();
    expect(() => checkExposure("0.0.0.0", undefined, true)).not.toThrow();
    expect(() => checkExposure("127.0.0.1", undefined, false)).not.toThrow();
  });
});

describe("content type", () => {
  test("JSON endpoints take application/json only (415 otherwise)", async () => {
    // What a browser page can post to localhost without a CORS preflight.
    const plain = await post(chat, JSON.stringify(hello()), { "content-type": "text/plain" });
    expect(plain.status).toBe(415);
    expect(plain.body.error.message).toContain('got "text/plain"');
    const form = await post(chat, "a=b", { "content-type": "application/x-www-form-urlencoded" });
    expect(form.status).toBe(415);
    expect((await post(chat, JSON.stringify(hello()), { "content-type": "application/json; charset=utf-8" })).status).toBe(200);
  });
});

describe("OpenAI parameters are honoured or refused by name", () => {
  const refused: [string, Record<string, unknown>][] = [
    ["n", { n: 2 }],
    ["tools", { tools: [{ type: "function", function: { name: "f", parameters: {} } }] }],
    ["tool_choice", { tool_choice: "auto" }],
    ["response_format", { response_format: { type: "json_object" } }],
    ["functions", { functions: [{ name: "f" }] }],
    ["function_call", { function_call: "auto" }],
    ["frequency_penalty", { frequency_penalty: 0.5 }],
    ["presence_penalty", { presence_penalty: -1 }],
    ["logit_bias", { logit_bias: { "5": 10 } }],
    ["top_logprobs", { logprobs: true, top_logprobs: 3 }],
    ["audio", { audio: { voice: "alloy", format: "wav" } }],
    ["reasoning_effort", { reasoning_effort: "high" }],
    ["min_p", { min_p: 0.1 }],
    ["model", { model: "gpt-4o" }],
    ["messages.0.content.0", { messages: [{ role: "user", content: [imagePart(pngDataUrl(createImage(8, 8)), "low")] }] }],
    ["messages.0.role", { messages: [{ role: "tool", content: "x", tool_call_id: "1" }] }],
  ];
  for (const [param, extra] of refused) {
    test(`${param}: ${JSON.stringify(extra).slice(0, 60)} is a 400 naming it`, async () => {
      const res = await post(chat, hello(extra));
      expect(res.status).toBe(400);
      expect(res.body.error.param).toStartWith(param);
      expect(res.body.error.message).toStartWith(param);
    });
  }

  test("neutral values, no-effect fields and the model's names are accepted", async () => {
    const accepted = [
      { tools: [], tool_choice: "none", response_format: { type: "text" }, frequency_penalty: 0, presence_penalty: 0, logit_bias: {} },
      { user: "u-1", metadata: { run: "a" }, store: false, n: 1, top_logprobs: 0, modalities: ["text"] },
      { model: loaded.builder.modelName },
      { model: `Qwen/${loaded.builder.modelName}` },
    ];
    for (const extra of accepted) expect({ extra, status: (await post(chat, hello(extra))).status }).toEqual({ extra, status: 200 });
  });

  test("--served-model-name sets what /v1/models lists and what requests may name", async () => {
    const named = startTestServer(loaded, { servedModelNames: ["tiny", "tiny-2"] });
    try {
      const models = (await (await fetch(`${named.url}/v1/models`)).json()) as { data: { id: string }[] };
      expect(models.data.map((m) => m.id)).toEqual(["tiny", "tiny-2"]);
      const res = await post(`${named.url}/v1/chat/completions`, hello({ model: "tiny-2" }));
      expect(res.status).toBe(200);
      expect(res.body.model).toBe("tiny");
      const wrong = await post(`${named.url}/v1/chat/completions`, hello({ model: loaded.builder.modelName }));
      expect(wrong.body.error).toMatchObject({ param: "model", code: "model_not_found" });
    } finally {
      named.stop();
    }
  });

  test("return_tokens_as_token_ids writes log-prob tokens as token_id:<id> (vLLM's extension)", async () => {
    const res = await post(chat, hello({ max_tokens: 4, logprobs: true, return_token_ids: true, return_tokens_as_token_ids: true, ignore_eos: true }));
    const choice = res.body.choices[0];
    expect(choice.logprobs.content.map((t: { token: string }) => t.token)).toEqual(choice.token_ids.map((id: number) => `token_id:${id}`));
  });
});

describe("request log", () => {
  test("one line per request: method, path, status, tokens, milliseconds; never bodies or keys", async () => {
    const server = startTestServer(loaded, { apiKey: "sk-log-secret" });
    try {
      const auth = { authorization: "Bearer sk-log-secret" };
      await post(`${server.url}/v1/chat/completions?key=q-secret`, hello({ messages: [{ role: "user", content: "body-secret" }] }), auth);
      await post(`${server.url}/v1/chat/completions`, hello(), {});
      await post(`${server.url}/v1/chat/completions`, hello({ n: 3 }), auth);
      expect(server.logs).toHaveLength(3);
      expect(server.logs[0]).toMatch(/^\S+Z POST \/v1\/chat\/completions 200 prompt_tokens=\d+ completion_tokens=2 \d+ms\n$/);
      expect(server.logs[1]).toMatch(/ POST \/v1\/chat\/completions 401 \d+ms\n$/);
      expect(server.logs[2]).toMatch(/ POST \/v1\/chat\/completions 400 \d+ms\n$/);
      const all = server.logs.join("");
      for (const secret of ["sk-log-secret", "q-secret", "body-secret"]) expect(all).not.toContain(secret);
    } finally {
      server.stop();
    }
  });

  test("streamed requests are logged when their stream ends; --quiet keeps only 5xx lines, with their cause", async () => {
    const failing = {
      ...loaded.builder,
      modelName: loaded.builder.modelName,
      eosTokenIds: loaded.builder.eosTokenIds,
      decode: (ids: readonly number[]) => loaded.builder.decode(ids),
      buildPrompt: (): never => {
        throw new Error("the chat template exploded");
      },
    };
    const verbose = startTestServer(loaded);
    const quiet = startTestServer(loaded, { log: { quiet: true } });
    const broken = startTestServer(loaded, { builder: failing, log: { quiet: true } });
    try {
      const stream = await fetch(`${verbose.url}/v1/chat/completions`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify(hello({ stream: true, max_tokens: 3, ignore_eos: true })),
      });
      await stream.text();
      expect(verbose.logs).toHaveLength(1);
      expect(verbose.logs[0]).toMatch(/ POST \/v1\/chat\/completions 200 prompt_tokens=\d+ completion_tokens=3 \d+ms\n$/);

      expect((await post(`${quiet.url}/v1/chat/completions`, hello())).status).toBe(200);
      expect(quiet.logs).toEqual([]);

      const res = await post(`${broken.url}/v1/chat/completions`, hello());
      expect(res.status).toBe(500);
      expect(res.body.error.type).toBe("server_error");
      expect(broken.logs).toHaveLength(1);
      expect(broken.logs[0]).toMatch(/ POST \/v1\/chat\/completions 500 \d+ms error: Error: the chat template exploded/);
    } finally {
      verbose.stop();
      quiet.stop();
      broken.stop();
    }
  });
});
