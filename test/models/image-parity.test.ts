/**
 * Image-path parity with transformers on a fixture whose every norm, bias and matrix is
 * perturbed (test/fixtures/qwen2_5_vl_parity, made by make_parity.py): single and
 * multiple images, square and non-square, grids of 4x4, 6x6, 8x6 and larger than a
 * window, images resized up and down, text before an image, and a three-turn chat with an
 * image in every user turn. For each: vagen's own prompt ids and pixel values, image
 * features, M-RoPE positions, logits (f32, relative error < 1e-4) and 12 greedy tokens,
 * by full recompute and through the engine (alone, batched, and continuing a session).
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { join } from "node:path";
import { Qwen25VLChatModel } from "../../src/models/qwen2_5_vl/chat-model.ts";
import { loadEngine, type LoadedEngine } from "../../src/engine/load.ts";
import type { ChatMessage } from "../../src/core/chat.ts";
import { bisectCase } from "./parity-bisect.ts";
import { fixtureMessages, refsJson } from "./fixture.ts";

const DIR = join(import.meta.dir, "..", "fixtures", "qwen2_5_vl_parity");

interface ParityCase {
  messages: { role: ChatMessage["role"]; content: string | { type: string; text?: string }[] }[];
  image_keys: string[];
  greedy: number[];
  image_grid_thw: number[][];
}
const meta = refsJson(DIR) as unknown as { cases: Record<string, ParityCase>; images: Record<string, { file: string }> };
const CASES = Object.keys(meta.cases);

test("the fixture covers the layouts users hit", () => {
  const grids = new Set(CASES.flatMap((n) => meta.cases[n]!.image_grid_thw.map((g) => `${g[1]}x${g[2]}`)));
  for (const g of ["4x4", "6x6", "8x6", "12x16", "16x22"]) expect(grids.has(g)).toBe(true);
  expect(meta.cases.multi_turn!.image_keys.length).toBe(3);
});

describe("Qwen2.5-VL image path against transformers (perturbed tiny model, CPU, f32)", () => {
  let chat: Qwen25VLChatModel;
  beforeAll(() => {
    chat = Qwen25VLChatModel.load(DIR, { device: "cpu", dtype: "f32" });
  });
  afterAll(() => chat.dispose());

  for (const name of CASES) {
    test(`${name}: prompt, pixels, features, positions, logits and 12 greedy tokens`, () => {
      const report = bisectCase(chat, DIR, name);
      const stage = (s: string) => report.stages.find((x) => x.stage === s)?.error;
      expect(stage("prompt ids")).toBe(0);
      expect(stage("pixel values")!).toBeLessThan(1e-5);
      expect(stage("vision.merger")!).toBeLessThan(1e-4);
      expect(stage("image features")!).toBeLessThan(1e-4);
      expect(stage("position ids")).toBe(0);
      expect(stage("logits")!).toBeLessThan(1e-4);
      expect(report.greedy).toEqual(report.expectedGreedy);
    }, 60_000);
  }
});

describe("the engine on the same prompts (what generate, serve and eval run)", () => {
  let loaded: LoadedEngine;
  beforeAll(() => {
    loaded = loadEngine(DIR, { device: "cpu", dtype: "f32", max_seq_len: 512, kv_cache_gib: 0.05, max_slots: 16 });
  });
  afterAll(async () => {
    await loaded.close();
  });

  test("every case, batched together, gives transformers' greedy tokens", async () => {
    const results = await Promise.all(
      CASES.map((name) =>
        loaded.engine.generate({
          prompt: loaded.builder.buildPrompt(fixtureMessages(DIR, name)),
          sampling: { temperature: 0, maxNewTokens: 12, ignoreStopTokens: true },
        }),
      ),
    );
    CASES.forEach((name, i) => expect([name, results[i]!.tokenIds]).toEqual([name, meta.cases[name]!.greedy]));
  }, 120_000);

  test("a multi-turn chat with an image per turn, continued in one session, gives the same tokens", async () => {
    const c = meta.cases.multi_turn!;
    const full = fixtureMessages(DIR, "multi_turn");
    const { engine, builder } = loaded;
    // Turns 1 and 2 first, in one session: the last request then reuses a cached prefix
    // that holds two images (everything up to where turn 1's sampled reply differs from
    // the scripted one) and prefills only the rest.
    const userTurns = full.map((m, i) => (m.role === "user" ? i : -1)).filter((i) => i >= 0);
    for (const end of userTurns.slice(0, -1)) {
      await engine.generate({ prompt: builder.buildPrompt(full.slice(0, end + 1)), sessionId: "multi-turn", sampling: { temperature: 0, maxNewTokens: 4 } });
    }
    const last = await engine.generate({
      prompt: builder.buildPrompt(full),
      sessionId: "multi-turn",
      sampling: { temperature: 0, maxNewTokens: 12, ignoreStopTokens: true },
    });
    expect(last.cachedPromptTokens).toBeGreaterThan(40);
    expect(last.tokenIds).toEqual(c.greedy);
    engine.releaseSession("multi-turn");
  }, 60_000);
});
