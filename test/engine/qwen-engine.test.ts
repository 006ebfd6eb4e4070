/**
 * The engine over the real Qwen2.5-VL code path (the committed tiny fixture, CPU, f32):
 * prompts, logits and greedy generations match transformers' references, batched and
 * alone, and multi-turn sessions with images reuse the cache without changing results.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { join } from "node:path";
import { readPng } from "../../src/models/image-io.ts";
import { loadEngine, type LoadedEngine } from "../../src/engine/load.ts";
import { EngineClient, createEngineClient } from "../../src/clients/engine-client.ts";
import type { ChatMessage } from "../../src/core/chat.ts";
import type { Qwen25VLChatModel } from "../../src/models/qwen2_5_vl/chat-model.ts";
import type { GenerationResult } from "../../src/engine/types.ts";
import { FIXTURE_DIR, maxRelativeError, ref, refsJson } from "../models/fixture.ts";

const refs = refsJson();
let loaded: LoadedEngine;

beforeAll(() => {
  loaded = loadEngine(FIXTURE_DIR, { device: "cpu", dtype: "f32", max_seq_len: 512, kv_cache_gib: 0.05, max_slots: 8 });
});
afterAll(async () => {
  await loaded.close();
});

/** A fixture case's messages in the client seam's form (images as pixels). */
function caseMessages(name: string): ChatMessage[] {
  const c = refs.cases[name]!;
  const keys = [...(c.image_keys ?? [])];
  return (c.messages as { role: ChatMessage["role"]; content: string | { type: string; text?: string }[] }[]).map((m) => ({
    role: m.role,
    content:
      typeof m.content === "string"
        ? [{ type: "text", text: m.content }]
        : m.content.map((p) =>
            p.type === "image"
              ? { type: "image" as const, image: readPng(join(FIXTURE_DIR, refs.images[keys.shift()!]!.file)) }
              : { type: "text" as const, text: p.text! },
          ),
  }));
}

function lastRow(name: string): Float64Array {
  const t = ref(`${name}.logits`);
  const V = t.shape[t.shape.length - 1]!;
  return t.values.slice(t.values.length - V);
}

const CASES = ["text", "one_image", "two_images"];

describe("Qwen2.5-VL through the engine (tiny fixture, CPU, f32)", () => {
  test("prompts, first-token logits and greedy generations match transformers, alone and batched", async () => {
    const { engine, builder } = loaded;
    const prompts = CASES.map((name) => builder.buildPrompt(caseMessages(name)));
    CASES.forEach((name, i) => expect(prompts[i]!.tokenIds).toEqual(refs.cases[name]!.input_ids!));
    const request = (i: number) => ({
      prompt: prompts[i]!,
      sampling: { temperature: 0, maxNewTokens: refs.cases[CASES[i]!]!.greedy!.length, ignoreStopTokens: true },
      returnLogits: true,
    });
    const alone: GenerationResult[] = [];
    for (let i = 0; i < CASES.length; i++) alone.push(await engine.generate(request(i)));
    const batched = await Promise.all(CASES.map((_, i) => engine.generate(request(i))));
    CASES.forEach((name, i) => {
      expect(alone[i]!.tokenIds).toEqual(refs.cases[name]!.greedy!);
      expect(batched[i]!.tokenIds).toEqual(refs.cases[name]!.greedy!);
      expect(maxRelativeError(alone[i]!.logits![0]!, lastRow(name))).toBeLessThan(1e-4);
      expect(maxRelativeError(batched[i]!.logits![0]!, lastRow(name))).toBeLessThan(1e-4);
    });
  });

  test("the in-process client continues a conversation in its session: same logits as a fresh prefill", async () => {
    const { engine, builder } = loaded;
    const client = new EngineClient(engine, builder);
    const qwen = loaded.model as Qwen25VLChatModel;
    const turn1 = caseMessages("one_image");
    const c1 = await client.create(turn1, { temperature: 0, maxTokens: 6 });
    expect(c1.tokenIds!.length).toBe(c1.usage.completionTokens);
    expect(c1.logprobs!.length).toBe(c1.tokenIds!.length);
    const image = readPng(join(FIXTURE_DIR, refs.images.b!.file));
    const turn2: ChatMessage[] = [
      ...turn1,
      { role: "assistant", content: [{ type: "text", text: c1.text }] },
      { role: "user", content: [{ type: "image", image }, { type: "text", text: "And this one?" }] },
    ];
    const encodedBefore = qwen.imagesEncoded;
    const cachedBefore = engine.stats().cachedPromptTokens;
    const viaSession = await client.generate(turn2, { temperature: 0, maxNewTokens: 6 });
    expect(qwen.imagesEncoded - encodedBefore).toBe(1); // only the new image
    const reused = engine.stats().cachedPromptTokens - cachedBefore;
    expect(reused).toBeGreaterThan(refs.cases.one_image!.input_ids!.length - 1);
    expect(viaSession.cachedPromptTokens).toBe(reused);
    const fresh = await engine.generate({ prompt: builder.buildPrompt(turn2), sampling: { temperature: 0, maxNewTokens: 6 }, returnLogits: true });
    expect(fresh.cachedPromptTokens).toBe(0);
    expect(viaSession.tokenIds).toEqual(fresh.tokenIds);
    viaSession.logprobs.forEach((lp, i) => expect(lp).toBeCloseTo(fresh.logprobs[i]!, 4));
    await client.close();
    expect(engine.stats().idleSessions).toBe(0);
  });

  test("a malformed image fails its own request only; requests beside it in the same prefill still match transformers", async () => {
    const { engine, builder } = loaded;
    const good = builder.buildPrompt(caseMessages("one_image"));
    const broken = builder.buildPrompt(caseMessages("two_images"));
    const image = broken.images[0]!;
    const bad = { ...broken, images: [{ ...image, image: { ...image.image, data: image.image.data.subarray(0, 10) } }, ...broken.images.slice(1)] };
    const sampling = { temperature: 0, maxNewTokens: refs.cases.one_image!.greedy!.length, ignoreStopTokens: true };
    const [ok, failed] = await Promise.allSettled([engine.generate({ prompt: good, sampling }), engine.generate({ prompt: bad, sampling })]);
    expect(failed.status).toBe("rejected");
    expect(String((failed as PromiseRejectedResult).reason)).toMatch(/expected \d+ RGB bytes, got 10/);
    expect(ok.status).toBe("fulfilled");
    expect((ok as PromiseFulfilledResult<GenerationResult>).value.tokenIds).toEqual(refs.cases.one_image!.greedy!);
  });

  test("createEngineClient loads a model directory and owns it", async () => {
    const client = createEngineClient(FIXTURE_DIR, { device: "cpu", dtype: "f32", max_seq_len: 256, kv_cache_gib: 0.02 }, { temperature: 0, maxTokens: 4 });
    expect(client.description).toBe("engine:qwen2_5_vl_tiny");
    const c = await client.create(caseMessages("text"), {});
    expect(c.tokenIds).toEqual(refs.cases.text!.greedy!.slice(0, 4));
    expect(c.finishReason).toBe("length");
    await client.close();
    await expect(client.engine.generate({ prompt: { tokenIds: [1], images: [] } })).rejects.toThrow(/closed/);
  });
});
