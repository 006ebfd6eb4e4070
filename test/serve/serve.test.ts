/**
 * `vagen serve`'s HTTP API, called with the official `openai` npm client, over the tiny
 * Qwen2.5-VL fixture on the CPU.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { join } from "node:path";
import OpenAI from "openai";
import { pngDataUrl } from "../../src/core/png.ts";
import { readPng } from "../../src/models/image-io.ts";
import { loadEngine, type LoadedEngine } from "../../src/engine/load.ts";
import { startServer } from "../../src/serve/server.ts";
import { FIXTURE_DIR, refsJson } from "../models/fixture.ts";

const refs = refsJson();
let loaded: LoadedEngine;
let server: ReturnType<typeof startServer>;
let client: OpenAI;

beforeAll(() => {
  loaded = loadEngine(FIXTURE_DIR, { device: "cpu", dtype: "f32", max_seq_len: 512, kv_cache_gib: 0.05, max_slots: 8 });
  server = startServer({ engine: loaded.engine, builder: loaded.builder, port: 0, log: { quiet: true } });
  client = new OpenAI({ baseURL: `http://127.0.0.1:${server.port}/v1`, apiKey: "unused", maxRetries: 0 });
});
afterAll(async () => {
  server.stop(true);
  await loaded.close();
});

const imageMessage = () => [
  {
    role: "user" as const,
    content: [
      { type: "image_url" as const, image_url: { url: pngDataUrl(readPng(join(FIXTURE_DIR, refs.images.a!.file))) } },
      { type: "text" as const, text: "What is in this picture?" },
    ],
  },
];

describe("vagen serve (OpenAI-compatible API)", () => {
  test("/v1/models lists the model", async () => {
    const models = await client.models.list();
    expect(models.data.map((m) => m.id)).toEqual([loaded.builder.modelName]);
  });

  test("non-streaming chat with an image returns transformers' greedy tokens, with logprobs", async () => {
    const greedy = refs.cases.one_image!.greedy!;
    const res = await client.chat.completions.create({
      model: loaded.builder.modelName,
      messages: imageMessage(),
      temperature: 0,
      max_tokens: greedy.length,
      logprobs: true,
      // @ts-expect-error vagen extensions
      ignore_eos: true,
      return_token_ids: true,
    });
    const choice = res.choices[0]!;
    expect((choice as unknown as { token_ids: number[] }).token_ids).toEqual(greedy);
    expect(choice.message.content).toBe(loaded.builder.decode(greedy));
    expect(choice.finish_reason).toBe("length");
    expect(choice.logprobs!.content!.length).toBe(greedy.length);
    expect(choice.logprobs!.content!.every((t) => t.logprob <= 0)).toBe(true);
    expect(res.usage!.prompt_tokens).toBe(refs.cases.one_image!.input_ids!.length);
    expect(res.usage!.completion_tokens).toBe(greedy.length);
  });

  test("streaming deltas add up to the non-streaming answer", async () => {
    const params = { model: loaded.builder.modelName, messages: [{ role: "user" as const, content: "Say something." }], temperature: 0, max_tokens: 10 };
    const full = await client.chat.completions.create(params);
    const stream = await client.chat.completions.create({ ...params, stream: true, logprobs: true, stream_options: { include_usage: true } });
    let text = "";
    let finish: string | null = null;
    let logprobs = 0;
    let usage: OpenAI.CompletionUsage | undefined;
    for await (const chunk of stream) {
      if (chunk.usage) usage = chunk.usage;
      const c = chunk.choices[0];
      if (!c) continue;
      text += c.delta.content ?? "";
      logprobs += c.logprobs?.content?.length ?? 0;
      finish = c.finish_reason ?? finish;
    }
    expect(text).toBe(full.choices[0]!.message.content!);
    expect(finish).toBe(full.choices[0]!.finish_reason);
    expect(logprobs).toBe(full.usage!.completion_tokens);
    expect(usage!.completion_tokens).toBe(full.usage!.completion_tokens);
  });

  test("a follow-up turn reuses the conversation's KV cache", async () => {
    const first = await client.chat.completions.create({ model: loaded.builder.modelName, messages: imageMessage(), temperature: 0, max_tokens: 5 });
    const reply = first.choices[0]!.message.content!;
    const second = await client.chat.completions.create({
      model: loaded.builder.modelName,
      messages: [...imageMessage(), { role: "assistant", content: reply }, { role: "user", content: "Why?" }],
      temperature: 0,
      max_tokens: 5,
    });
    const cached = (second.usage as unknown as { prompt_tokens_details: { cached_tokens: number } }).prompt_tokens_details.cached_tokens;
    expect(cached).toBeGreaterThanOrEqual(first.usage!.prompt_tokens);
  });

  test("bad requests get a 400 naming the problem", async () => {
    // The client's promises are lazy; `.then` both sends the request and keeps the error.
    const failure = (p: Promise<unknown>) => p.then(() => undefined, (e: unknown) => e as { status?: number; message: string });
    const notPng = await failure(
      client.chat.completions.create({
        model: loaded.builder.modelName,
        messages: [{ role: "user", content: [{ type: "image_url", image_url: { url: "https://example.com/cat.png" } }] }],
      }),
    );
    expect(notPng?.status).toBe(400);
    expect(notPng?.message).toContain("PNG data URL");
    expect((await failure(client.chat.completions.create({ model: loaded.builder.modelName, messages: [] })))?.status).toBe(400);
    const topP = await failure(client.chat.completions.create({ model: loaded.builder.modelName, messages: [{ role: "user", content: "hi" }], top_p: 0 }));
    expect(topP?.status).toBe(400);
    expect(topP?.message).toContain("top_p");
  });

  test("a client that disconnects mid-stream frees its sequence; the server keeps serving", async () => {
    const ctrl = new AbortController();
    const decodedBefore = loaded.engine.stats().decodeTokens;
    const res = await fetch(`http://127.0.0.1:${server.port}/v1/chat/completions`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ messages: [{ role: "user", content: "Talk for a while." }], max_tokens: 200, stream: true, ignore_eos: true }),
      signal: ctrl.signal,
    });
    const reader = res.body!.getReader();
    await reader.read(); // the role chunk: generation is under way
    ctrl.abort();
    await reader.read().catch(() => undefined);
    const capacity = loaded.engine.capacity.slots;
    for (let i = 0; i < 200 && loaded.engine.stats().runningSequences > 0; i++) await Bun.sleep(5);
    expect(loaded.engine.stats().runningSequences).toBe(0);
    expect(loaded.engine.stats().decodeTokens - decodedBefore).toBeLessThan(199); // stopped early, not run to the end
    expect(loaded.engine.stats().freeSlots + loaded.engine.stats().idleSessions).toBe(capacity);
    const after = await client.chat.completions.create({ model: loaded.builder.modelName, messages: [{ role: "user", content: "hi" }], max_tokens: 2 });
    expect(after.choices[0]!.finish_reason).toBeDefined();
  });

  describe("log-prob bytes are each token's own bytes", () => {
    // Sampled at temperature 1, the fixture's 368-token vocabulary (128 of them single
    // bytes 0x80-0xff) gives tokens that end inside a UTF-8 character: alone they decode
    // to U+FFFD, whose bytes (ef bf bd) the old code reported.
    const request = { model: "", messages: [{ role: "user" as const, content: "hi" }], max_tokens: 12, temperature: 1, seed: 1, logprobs: true };
    const tokenBytes = (id: number) => Array.from(loaded.builder.tokenBytes!(id));
    const REPLACEMENT = [0xef, 0xbf, 0xbd];

    function checkEntries(ids: number[], entries: { token: string; bytes: number[] | null }[], text: string) {
      expect(entries.map((e) => e.bytes)).toEqual(ids.map(tokenBytes));
      const split = entries.filter((e) => e.token === "\ufffd" && e.bytes!.length === 1);
      expect(split.length).toBeGreaterThan(0);
      for (const e of split) expect(e.bytes).not.toEqual(REPLACEMENT);
      // Put together, the bytes are the text's own (decoded the way the text was).
      expect(new TextDecoder().decode(Uint8Array.from(entries.flatMap((e) => e.bytes!)))).toBe(text);
    }

    test("non-streaming", async () => {
      const res = await client.chat.completions.create({ ...request, model: loaded.builder.modelName, stream: false,
        // @ts-expect-error vagen extensions
        return_token_ids: true, ignore_eos: true });
      const choice = res.choices[0]!;
      checkEntries((choice as unknown as { token_ids: number[] }).token_ids, choice.logprobs!.content!, choice.message.content!);
    });

    test("streaming", async () => {
      const stream = await client.chat.completions.create({ ...request, model: loaded.builder.modelName, stream: true,
        // @ts-expect-error vagen extensions
        return_token_ids: true, ignore_eos: true });
      const ids: number[] = [];
      const entries: { token: string; bytes: number[] | null }[] = [];
      let text = "";
      for await (const chunk of stream) {
        const c = chunk.choices[0];
        if (!c) continue;
        text += c.delta.content ?? "";
        ids.push(...((c as unknown as { token_ids?: number[] }).token_ids ?? []));
        entries.push(...(c.logprobs?.content ?? []));
      }
      checkEntries(ids, entries, text);
    });
  });
});
