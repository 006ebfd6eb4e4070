/**
 * The demo's task pieces: the tokenizer learned on task text (loaded by the tokenizers
 * library, specials single ids, any text round-trips), the small Qwen2.5-VL written as a
 * model directory that the model loader and the engine accept (same seed, same bytes),
 * and the observation-only harness.
 */
import { afterAll, describe, expect, test } from "bun:test";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import * as torch from "../../src/torch/index.ts";
import { createEngineClient } from "../../src/clients/engine-client.ts";
import { DEMO_MODEL_SPEC, mropeSection, parameterCount, writeTinyQwenModelDir, type TinyQwenSpec } from "../../src/demo/model-dir.ts";
import { byteSymbols, QWEN25_VL_SPECIAL_TOKENS, trainBpeTokenizer } from "../../src/demo/tokenizer.ts";
import { messageText } from "../../src/core/chat.ts";
import { OBSERVATION_ONLY_HARNESS } from "../../src/harness/observation-only.ts";
import { createHarness } from "../../src/harness/registry.ts";
import { Qwen25VLChatModel } from "../../src/models/qwen2_5_vl/chat-model.ts";
import { TextTokenizer } from "../../src/models/tokenizer.ts";
import { FrozenLakeEnv } from "../../envs/frozenlake/env.ts";

const CORPUS = [
  ...Array<string>(4).fill("[Initial Observation]:\n<image>\nDecide your next action(s).\n"),
  ...["Left", "Down", "Right", "Up"].flatMap((a) => Array<string>(3).fill(`<answer>${a}</answer>`)),
];

/** A model small enough to write and load in well under a second. */
const SMALL: TinyQwenSpec = { ...DEMO_MODEL_SPEC, textHidden: 32, textLayers: 1, textHeads: 2, textKvHeads: 1, textIntermediate: 64, visionHidden: 16, visionDepth: 1, visionHeads: 1, visionIntermediate: 32 };

const dirs: string[] = [];
const tempDir = () => {
  const dir = mkdtempSync(join(tmpdir(), "vagen-demo-"));
  dirs.push(dir);
  return dir;
};
afterAll(() => dirs.forEach((d) => rmSync(d, { recursive: true, force: true })));

describe("task tokenizer", () => {
  const trained = trainBpeTokenizer(CORPUS, { maxMerges: 200 });
  const tokenizer = new TextTokenizer({ tokenizer: trained.tokenizer, config: trained.config });

  test("the 256 byte symbols come first, printable ASCII standing for itself", () => {
    const symbols = byteSymbols();
    expect(symbols).toHaveLength(256);
    expect(new Set(symbols.map((s) => s.byte)).size).toBe(256);
    expect(symbols[0]).toEqual({ byte: 0x21, symbol: "!" });
    expect(symbols.find((s) => s.byte === 0x20)!.symbol).toBe("Ġ"); // GPT-2's space
  });

  test("frequent task words become single tokens; words seen once are not merged", () => {
    // Qwen's split gives "<answer", ">Right", "</", "answer", ">": one token each once merged.
    expect(tokenizer.encode("<answer>Right</answer>")).toHaveLength(5);
    expect(tokenizer.encode(" Observation")).toHaveLength(1);
    expect(tokenizer.encode("zebra").length).toBeGreaterThan(1);
  });

  test("special tokens are single ids after the learned vocabulary, in Qwen's order", () => {
    const ids = QWEN25_VL_SPECIAL_TOKENS.map((t) => tokenizer.encode(t));
    ids.forEach((id) => expect(id).toHaveLength(1));
    const flat = ids.map((id) => id[0]!);
    expect(flat).toEqual(QWEN25_VL_SPECIAL_TOKENS.map((t) => trained.specialIds[t]));
    expect(flat).toEqual(flat.map((_, i) => trained.vocabSize - QWEN25_VL_SPECIAL_TOKENS.length + i));
  });

  test("any text round-trips, bytes being the fallback", () => {
    for (const text of ["<answer>Up</answer>", "héllo wörld  \n\n x", "日本語 🧊"]) {
      expect(tokenizer.decode(tokenizer.encode(text))).toBe(text);
    }
    const ids = tokenizer.encode("<|im_start|>assistant\n<answer>Left</answer><|im_end|>");
    expect(tokenizer.decode(ids, { skipSpecialTokens: true })).toBe("assistant\n<answer>Left</answer>");
  });

  test("the same corpus gives the same tokenizer", () => {
    expect(JSON.stringify(trainBpeTokenizer(CORPUS, { maxMerges: 200 }).tokenizer)).toBe(JSON.stringify(trained.tokenizer));
  });
});

describe("small Qwen2.5-VL model directory", () => {
  const tokenizer = trainBpeTokenizer(CORPUS, { maxMerges: 200 });

  test("M-RoPE sections split a head's frequency pairs 1 : 1.5 : 1.5", () => {
    expect(mropeSection(16)).toEqual([2, 3, 3]); // the tiny fixture's
    expect(mropeSection(32)).toEqual([4, 6, 6]);
    expect(mropeSection(128)).toEqual([16, 24, 24]); // Qwen2.5-VL-3B's
  });

  test("loads through the model family, with the parameter count the spec promises", () => {
    const dir = join(tempDir(), "model");
    writeTinyQwenModelDir(dir, SMALL, tokenizer, { seed: 3 });
    const chat = Qwen25VLChatModel.load(dir, { device: "cpu", dtype: "f32" });
    try {
      const total = [...chat.model.weights.values()].reduce((n, t) => n + t.numel(), 0);
      expect(total).toBe(parameterCount(SMALL, tokenizer.vocabSize));
      expect(chat.model.config.imageTokenId).toBe(tokenizer.specialIds["<|image_pad|>"]);
      expect(chat.eosTokenIds).toContain(tokenizer.specialIds["<|im_end|>"]);
      // transformers' init: norms one, biases zero, matrices small and centred.
      const norm = chat.model.weights.get("model.norm.weight")!.toArray() as Float32Array;
      expect([...norm].every((x) => x === 1)).toBe(true);
      const embed = chat.model.weights.get("model.embed_tokens.weight")!;
      const std = torch.tidy(() => embed.std().item());
      expect(std).toBeGreaterThan(0.015);
      expect(std).toBeLessThan(0.025);
    } finally {
      chat.dispose();
    }
  }, 30_000);

  test("the same seed writes the same weights; another seed others", () => {
    const [a, b, c] = [1, 1, 2].map((seed) => {
      const dir = join(tempDir(), "model");
      writeTinyQwenModelDir(dir, SMALL, tokenizer, { seed });
      return readFileSync(join(dir, "model.safetensors"));
    });
    expect(a!.equals(b!)).toBe(true);
    expect(a!.equals(c!)).toBe(false);
  });

  test("the engine answers a FrozenLake image observation through it", async () => {
    const dir = join(tempDir(), "model");
    writeTinyQwenModelDir(dir, SMALL, tokenizer, { seed: 0 });
    const env = new FrozenLakeEnv({ render_mode: "vision", size: 4 });
    const { obs } = await env.reset(0);
    const client = createEngineClient(dir, { device: "cpu" });
    try {
      const image = obs.images[0]!;
      const out = await client.create([{ role: "user", content: [{ type: "text", text: "Where?" }, { type: "image", image }] }], { maxTokens: 4, temperature: 0 });
      expect(out.tokenIds!.length).toBeGreaterThan(0);
      expect(out.tokenIds!.length).toBeLessThanOrEqual(4);
      // 256 x 256 board resized to 112 x 112: 4 x 4 merged tokens, one per cell.
      expect(out.usage.promptTokens).toBeGreaterThan(16);
    } finally {
      await client.close?.();
    }
  }, 30_000);
});

describe("observation-only harness", () => {
  test("sends only the current observation, one row per turn", async () => {
    const harness = await createHarness(OBSERVATION_ONLY_HARNESS);
    expect(harness.rowPerTurn).toBe(true);
    const env = new FrozenLakeEnv({ render_mode: "text", prompt_format: "no_think", max_actions_per_step: 1 });
    const prompts: number[] = [];
    const client = {
      description: "fixed",
      create: async (messages: unknown[]) => {
        prompts.push(messages.length);
        return { text: "<answer>Left</answer>", finishReason: "stop", usage: { promptTokens: 0, completionTokens: 0 } };
      },
    };
    const record = await harness.runEpisode({ env, client, seed: 4, maxTurns: 3, sampling: {} });
    expect(record.turns.length).toBeGreaterThan(0);
    expect(prompts.every((n) => n === 1)).toBe(true);
    expect(record.turns[0]!.prompt[0]!.role).toBe("user");
  });

  test("an image observation is sent as its image alone; a text one keeps its text", async () => {
    const harness = await createHarness(OBSERVATION_ONLY_HARNESS);
    const client = {
      description: "fixed",
      create: async () => ({ text: "<answer>Left</answer>", finishReason: "stop", usage: { promptTokens: 0, completionTokens: 0 } }),
    };
    const vision = await harness.runEpisode({ env: new FrozenLakeEnv({ render_mode: "vision", prompt_format: "no_think", max_actions_per_step: 1 }), client, seed: 4, maxTurns: 2, sampling: {} });
    for (const turn of vision.turns) {
      // The env's words ("the extracted valid action is ['left']") are left out: the board is all.
      expect(turn.prompt[0]!.content.map((p) => p.type)).toEqual(["image"]);
    }
    const text = await harness.runEpisode({ env: new FrozenLakeEnv({ render_mode: "text", prompt_format: "no_think", max_actions_per_step: 1 }), client, seed: 4, maxTurns: 2, sampling: {} });
    expect(messageText(text.turns[0]!.prompt[0]!)).toContain("[Initial Observation]");
  });
});
