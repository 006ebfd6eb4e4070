import { describe, expect, test } from "bun:test";
import { join } from "node:path";
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { ChatTemplate, type TemplateMessage } from "../../src/models/chat-template.ts";
import { DEFAULT_IMAGE_PROCESSOR, imageGrid, processImages } from "../../src/models/image-processor.ts";
import { readPng } from "../../src/models/image-io.ts";
import { Qwen25VLProcessor, checkImageTokens } from "../../src/models/qwen2_5_vl/processor.ts";
import { TextTokenizer } from "../../src/models/tokenizer.ts";
import { VagenError } from "../../src/core/errors.ts";
import { FIXTURE_DIR, refsJson } from "./fixture.ts";

const refs = refsJson();
const tokenizer = TextTokenizer.fromDir(FIXTURE_DIR);
const template = ChatTemplate.fromDir(FIXTURE_DIR);

describe("TextTokenizer", () => {
  test("encodes like the tokenizers library (byte-level BPE, Qwen2 split, special tokens)", () => {
    for (const c of refs.tokenizer_checks) expect(tokenizer.encode(c.text)).toEqual(c.ids);
  });

  test("decodes back to the text", () => {
    for (const text of ["Hello world!", "digits 2026-11-30", "naïve café 東京 😀"]) {
      expect(tokenizer.decode(tokenizer.encode(text))).toBe(text);
    }
    expect(tokenizer.decode(refs.cases.text!.greedy!)).toBe(refs.cases.text!.greedy_text!);
  });

  test("byte-level token bytes streamed through UTF-8 give exactly the full decode", () => {
    const bytesOf = tokenizer.tokenBytes();
    expect(bytesOf).toBeDefined();
    let seed = 7;
    const rand = (n: number) => ((seed = (seed * 1103515245 + 12345) % 2 ** 31), seed % n);
    const texts = ["naïve café 東京 😀 <|im_end|> done", "a\n\tb  c", ...refs.tokenizer_checks.map((c) => c.text)];
    // Random id sequences too: they split multi-byte characters anywhere, and include specials.
    const sequences = [...texts.map((t) => tokenizer.encode(t)), ...Array.from({ length: 50 }, () => Array.from({ length: 40 }, () => rand(tokenizer.size)))];
    for (const ids of sequences) {
      const utf8 = new TextDecoder();
      let streamed = "";
      for (const id of ids) streamed += utf8.decode(bytesOf!(id), { stream: true });
      streamed += utf8.decode();
      expect(streamed).toBe(tokenizer.decode(ids, { skipSpecialTokens: true }));
    }
  });

  test("knows its special tokens", () => {
    expect(tokenizer.tokenId("<|image_pad|>")).toBe(366);
    expect(tokenizer.isSpecial(366)).toBe(true);
    expect(tokenizer.isSpecial(tokenizer.encode("a")[0]!)).toBe(false);
    expect(tokenizer.configToken("eos_token")).toBe("<|im_end|>");
    expect(() => tokenizer.tokenId("<|nope|>")).toThrow(/no token/);
  });

  test("a directory without tokenizer.json is a clear error", () => {
    expect(() => TextTokenizer.fromDir(tmpdir())).toThrow(/tokenizer\.json: file not found/);
  });
});

describe("ChatTemplate", () => {
  test("renders the fixture's conversations exactly like transformers", () => {
    for (const c of Object.values(refs.cases)) {
      if (!c.messages) continue;
      expect(template.render(c.messages as TemplateMessage[], { addGenerationPrompt: true })).toBe(c.prompt_text!);
    }
  });

  test("falls back to tokenizer_config.json's chat_template", () => {
    const dir = mkdtempSync(join(tmpdir(), "vagen-tpl-"));
    writeFileSync(join(dir, "tokenizer_config.json"), JSON.stringify({ chat_template: "{% for m in messages %}[{{ m.role }}]{{ m.content }}{% endfor %}" }));
    expect(ChatTemplate.fromDir(dir).render([{ role: "user", content: "hi" }])).toBe("[user]hi");
  });

  test("a directory without any template says where it looked", () => {
    const dir = mkdtempSync(join(tmpdir(), "vagen-tpl-"));
    expect(() => ChatTemplate.fromDir(dir)).toThrow(/no chat template found/);
  });
});

describe("Qwen25VLProcessor", () => {
  const processor = new Qwen25VLProcessor(tokenizer, template, DEFAULT_IMAGE_PROCESSOR, 366);
  const image = (key: string) => readPng(join(FIXTURE_DIR, refs.images[key]!.file));

  for (const name of ["text", "one_image", "two_images"]) {
    test(`token ids match transformers' processor for ${name}`, () => {
      const c = refs.cases[name]!;
      const out = processor.encodeChat(c.messages as TemplateMessage[], (c.image_keys ?? []).map((k) => image(k)));
      expect(out.inputIds).toEqual(c.input_ids!);
      expect((out.images?.gridThw ?? []) as number[][]).toEqual(c.image_grid_thw ?? []);
      // Grids only (no pixel work) give the same tokens and grids.
      const lazy = processor.encodeChat(c.messages as TemplateMessage[], (c.image_keys ?? []).map((k) => image(k)), { pixels: false });
      expect(lazy.images).toBeUndefined();
      expect(lazy.inputIds).toEqual(c.input_ids!);
      expect(lazy.gridThw as number[][]).toEqual(c.image_grid_thw ?? []);
    });
  }

  test("imageGrid predicts processImages' grid for any size", () => {
    for (const [w, h] of [[56, 56], [100, 37], [336, 336], [1000, 20], [29, 900]] as const) {
      const img = { width: w, height: h, data: new Uint8Array(w * h * 3) };
      expect(imageGrid(img)).toEqual(processImages([img]).gridThw[0]!);
    }
  });

  test("refuses images that the messages do not mark", () => {
    const msgs: TemplateMessage[] = [{ role: "user", content: "no image here" }];
    expect(() => processor.encodeChat(msgs, [image("b")])).toThrow(/mark 0 image\(s\) but 1/);
  });

  test("checks image token counts against the image grids", () => {
    expect(() => checkImageTokens([[366, 366, 366]], [[1, 4, 4]], 366, 2)).toThrow(VagenError);
    expect(() => checkImageTokens([[366, 366, 366]], [[1, 4, 4]], 366, 2)).toThrow(/3 image token\(s\).*4 feature\(s\)/);
    expect(() => checkImageTokens([[1, 366, 366], [366, 366, 2]], [[1, 4, 4]], 366, 2)).not.toThrow();
    expect(() => checkImageTokens([[366]], [], 366, 2)).toThrow(/without its images/);
  });
});
