/**
 * Item 8 of the seam: the engine's sampling log-probs equal the training forward's
 * log-probs of the same tokens (CPU, f32), so a PPO ratio starts at 1. Each fixture (the
 * two Qwen2.5-VL ones with text-only and image prompts, the Qwen3 text one with single-
 * and multi-turn chats) sampled together at temperature 1 (the engine batches them),
 * then one padded training forward with gradients over prompt + sampled ids.
 *
 * f32 tolerance 1e-4: the two paths run the same decoder over the same weights; what
 * differs is the summation order (a KV-cached decode step against one causal pass,
 * packed against unpacked projections, one image at a time against a batch of them),
 * worth ~1e-6 per log-prob here.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { join } from "node:path";
import { Engine } from "../../src/engine/engine.ts";
import { loadEngine, type LoadedEngine } from "../../src/engine/load.ts";
import { ModelRunner } from "../../src/engine/model-runner.ts";
import * as torch from "../../src/torch/index.ts";
import { FIXTURE_DIR } from "../models/fixture.ts";
import { compareLogprobs, fixtureMessages, textMessages } from "./logprob-check.ts";

const PARITY_DIR = join(import.meta.dir, "..", "fixtures", "qwen2_5_vl_parity");
const QWEN3_DIR = join(import.meta.dir, "..", "fixtures", "qwen3_tiny");
const TOLERANCE = 1e-4;

for (const [fixture, dir, cases] of [
  ["tiny", FIXTURE_DIR, ["text", "one_image", "two_images"]],
  ["parity (perturbed weights)", PARITY_DIR, ["two_images", "text_first", "small30x40"]],
  ["Qwen3 tiny (text family, q/k norms, tied head)", QWEN3_DIR, ["single", "multi_turn", "system"]],
] as const) {
  describe(`engine sampling log-probs = training forward log-probs (${fixture} fixture, CPU, f32)`, () => {
    let loaded: LoadedEngine;
    let ledger: { leaked(): number };
    beforeAll(() => {
      torch.loadTorch();
      ledger = torch.tensorLedger();
      loaded = loadEngine(dir, { device: "cpu", dtype: "f32", max_seq_len: 512, kv_cache_gib: 0.05, max_slots: 8 });
    });
    afterAll(async () => {
      await loaded.close();
      expect(ledger.leaked()).toBe(0);
    });

    test("text and image prompts, batched, at temperature 1", async () => {
      const messages = [...cases.map((name) => fixtureMessages(dir, name)), textMessages("Count to five."), textMessages("Hi")];
      const r = await compareLogprobs(loaded, messages, { temperature: 1, maxNewTokens: 10 });
      expect(r.results.reduce((n, g) => n + g.tokenIds.length, 0)).toBeGreaterThan(messages.length);
      r.results.forEach((g, b) => expect(r.recomputed[b]!.length).toBe(g.logprobs.length));
      expect(r.maxAbsDiff).toBeLessThan(TOLERANCE);
      // The recomputation is differentiable: the probe weight got a gradient.
      expect(r.gradNorm).toBeGreaterThan(0);
    }, 60_000);

    test("a tempered distribution (temperature 0.7) agrees too", async () => {
      const messages = [fixtureMessages(dir, cases[1]), textMessages("Describe the weather.")];
      const r = await compareLogprobs(loaded, messages, { temperature: 0.7, maxNewTokens: 6 });
      expect(r.maxAbsDiff).toBeLessThan(TOLERANCE);
    }, 60_000);
  });
}

describe("the family's vision ids are never sampled (tiny fixture, CPU, f32)", () => {
  let loaded: LoadedEngine;
  beforeAll(() => {
    torch.loadTorch();
    loaded = loadEngine(FIXTURE_DIR, { device: "cpu", dtype: "f32", max_seq_len: 512, kv_cache_gib: 0.05, max_slots: 8 });
  });
  afterAll(async () => {
    await loaded.close();
  });

  // At temperature 20 the 368-id vocabulary is sampled almost uniformly, so its 5 vision
  // ids would come up about once in 70 tokens.
  const prompts = () => Array.from({ length: 8 }, (_, i) => textMessages(`Say something, number ${i}.`));
  const vision = () => new Set(loaded.model.visionTokenIds);

  test("an engine without the bias samples them (the control)", async () => {
    const runner = new ModelRunner(loaded.model, { slots: 8, slotTokens: 512, seed: 1 });
    const bare = new Engine(runner, { decode: (ids) => loaded.model.decode(ids), eosTokenIds: [] });
    try {
      const results = await Promise.all(prompts().map((m, i) => bare.generate({ prompt: loaded.model.buildPrompt(m), sampling: { temperature: 20, maxNewTokens: 60, seed: 500 + i } })));
      expect(results.flatMap((r) => r.tokenIds).filter((id) => vision().has(id)).length).toBeGreaterThan(0);
    } finally {
      await bare.close();
    }
  }, 60_000);

  test("the loaded engine never does, and its log-probs are the trainer's over the other ids", async () => {
    const r = await compareLogprobs(loaded, prompts(), { temperature: 20, maxNewTokens: 60, seedBase: 500 });
    const sampled = r.results.flatMap((g) => g.tokenIds);
    expect(sampled.length).toBeGreaterThan(150); // replies end at an end-of-turn id
    expect(sampled.filter((id) => vision().has(id))).toEqual([]);
    expect(r.maxAbsDiff).toBeLessThan(TOLERANCE);
  }, 60_000);
});

