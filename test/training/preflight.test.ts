import { describe, expect, test } from "bun:test";
import { join } from "node:path";
import { createEnv } from "../../envs/registry.ts";
import { loadModelFamily } from "../../src/models/index.ts";
import { checkResponseFormats, formatTags, lostTags } from "../../src/training/preflight.ts";

describe("preflight: response-format tags against the tokenizer", () => {
  test("tags are found in a system prompt", () => {
    expect(formatTags("Answer as <think>...</think><answer>...</answer>, not <b> twice <b>")).toEqual(["<think>", "</think>", "<answer>", "</answer>", "<b>"]);
  });

  test("a tag the tokenizer holds as a special token is lost; plain ones survive", () => {
    // a codec where "<think>" is one special token (id 1) that decoding skips
    const codec = {
      encode: (text: string) => text.split(/(<think>)/).flatMap((p) => (p === "<think>" ? [1] : Array.from(p, (c) => c.charCodeAt(0) + 10))),
      decode: (ids: readonly number[]) => ids.filter((i) => i !== 1).map((i) => String.fromCharCode(i - 10)).join(""),
    };
    expect(lostTags(["<think>", "</think>", "<answer>"], codec)).toEqual(["<think>"]);
  });

  test("Sokoban's wm format passes on the Qwen2.5-VL fixture's tokenizer, and a lost tag names the env key", async () => {
    const family = loadModelFamily(join(import.meta.dir, "../fixtures/qwen2_5_vl_tiny"), { device: "cpu", dtype: "f32" });
    const codec = { encode: (t: string) => family.tokenizer.encode(t), decode: (ids: readonly number[]) => family.decode(ids) };
    const sokoban = { key: 'train.yaml: key "data.train.sokoban"', create: () => createEnv("Sokoban", { prompt_format: "wm" }) };
    await checkResponseFormats([sokoban], codec);
    const dropsAnswer = { encode: codec.encode, decode: (ids: readonly number[]) => codec.decode(ids).replaceAll("<answer>", "") };
    await expect(checkResponseFormats([sokoban], dropsAnswer)).rejects.toThrow('key "data.train.sokoban": the response format uses <answer>');
    family.dispose();
  });
});
