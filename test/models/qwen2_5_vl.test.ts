/**
 * Parity of vagen's Qwen2.5-VL with transformers on the committed tiny model (CPU, f32):
 * vision features, logits for text / one-image / two-image prompts, padded batches (left
 * and right), bf16 within bf16 rounding, greedy generations token for token; plus the
 * value head, gradients, count checks and tensor lifetimes.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import * as torch from "../../src/torch/index.ts";
import { F, type Tensor } from "../../src/torch/index.ts";
import { ConcatKVCache } from "../../src/models/kv-cache.ts";
import { generate } from "../../src/models/generation.ts";
import { Qwen25VLChatModel } from "../../src/models/qwen2_5_vl/chat-model.ts";
import { Qwen25VLModel } from "../../src/models/qwen2_5_vl/model.ts";
import type { TemplateMessage } from "../../src/models/chat-template.ts";
import { readPng } from "../../src/models/image-io.ts";
import { FIXTURE_DIR, maxRelativeError, ref, refsJson } from "./fixture.ts";
import { BATCH_CASES, SINGLE_CASES, bf16RoundingScale, caseError, greedyFromIds, refGrids as grids, refRows, refTensor } from "./parity.ts";
import { join } from "node:path";
import { TextTokenizer } from "../../src/models/tokenizer.ts";
import { ChatTemplate } from "../../src/models/chat-template.ts";
import { DEFAULT_IMAGE_PROCESSOR } from "../../src/models/image-processor.ts";

const refs = refsJson();
let model: Qwen25VLModel;
let baseline = 0;

/** The chat wrapper over the shared f32 model (the fixture's tokenizer, template, processor). */
function tinyChat(): Qwen25VLChatModel {
  return new Qwen25VLChatModel(model, TextTokenizer.fromDir(FIXTURE_DIR), ChatTemplate.fromDir(FIXTURE_DIR), DEFAULT_IMAGE_PROCESSOR);
}

beforeAll(() => {
  torch.loadTorch();
  baseline = torch.liveTensors();
  model = Qwen25VLModel.load(FIXTURE_DIR, { device: "cpu", dtype: "f32" });
});

afterAll(() => {
  model.dispose();
  expect(torch.liveTensors()).toBe(baseline);
});

describe("Qwen2.5-VL tiny, f32 on the CPU, against transformers", () => {
  for (const name of ["one_image", "two_images"]) {
    test(`vision features match for ${name}`, () => {
      const actual = torch.noGrad(() =>
        torch.tidy(() => Float64Array.from(model.encodeImages(refTensor(`${name}.pixel_values`), grids(`${name}.image_grid_thw`)).toArray() as Float32Array)),
      );
      const expected = ref(`${name}.image_features`);
      expect(actual.length).toBe(expected.values.length);
      expect(maxRelativeError(actual, expected.values)).toBeLessThan(1e-4);
    });
  }

  for (const name of [...SINGLE_CASES, ...BATCH_CASES]) {
    test(`logits match for ${name}${name.startsWith("batch") ? " at every real token" : ""}`, () => {
      expect(caseError(model, name)).toBeLessThan(1e-4);
    });
  }

  test("greedy decoding from the reference ids matches transformers", () => {
    for (const name of SINGLE_CASES) {
      const expected = refs.cases[name]!.greedy!;
      expect(greedyFromIds(model, name, expected.length)).toEqual(expected);
    }
  });

  test("the chat pipeline (template, processor, generate) reproduces the greedy generations", () => {
    const chat = tinyChat();
    for (const name of SINGLE_CASES) {
      const c = refs.cases[name]!;
      const images = (c.image_keys ?? []).map((k) => readPng(join(FIXTURE_DIR, refs.images[k]!.file)));
      const prompt = chat.encodeChat(c.messages as TemplateMessage[], images);
      expect(prompt.inputIds).toEqual(c.input_ids!);
      // transformers generated from the processor's exact pixel values; so do we.
      if (prompt.processed) prompt.processed.pixelValues = Float32Array.from(ref(`${name}.pixel_values`).values);
      const [out] = torch.noGrad(() => generate(chat, [prompt], { maxTokens: c.greedy!.length, temperature: 0, topP: 1, seed: 0, stopTokenIds: [] }));
      expect(out!.tokenIds).toEqual(c.greedy!);
    }
  });

  test("batched greedy decoding equals one prompt at a time", () => {
    const chat = tinyChat();
    const prompts = ["text", "one_image", "two_images"].map((name) => {
      const c = refs.cases[name]!;
      return chat.encodeChat(c.messages as TemplateMessage[], (c.image_keys ?? []).map((k) => readPng(join(FIXTURE_DIR, refs.images[k]!.file))));
    });
    const opts = { maxTokens: 6, temperature: 0, topP: 1, seed: 0, stopTokenIds: [] };
    const batched = torch.noGrad(() => generate(chat, prompts, opts)).map((g) => g.tokenIds);
    const single = prompts.map((p) => torch.noGrad(() => generate(chat, [p], opts))[0]!.tokenIds);
    expect(batched).toEqual(single);
  });
});

describe("packed projections", () => {
  test("q/k/v and gate/up are views into packed storage: in-place updates reach the packed GEMM", () => {
    const name = "model.layers.0.self_attn.k_proj.bias";
    const logits = () =>
      torch.noGrad(() => torch.tidy(() => model.logits(model.forwardBatch({ inputIds: [[1, 2, 3]], imageGridThw: [] }).hidden).toFloat32Array()));
    const before = logits();
    const bias = model.weights.get(name)!;
    torch.noGrad(() => bias.add_(0.5));
    const after = logits();
    torch.noGrad(() => bias.sub_(0.5));
    expect(maxRelativeError(Float64Array.from(after), Float64Array.from(before))).toBeGreaterThan(1e-3);
    expect(Array.from(logits())).toEqual(Array.from(before));
  });

  test("with gradients the forward reads the named views: same logits, and the views get gradients", () => {
    const inputIds = [[5, 9, 2, 7]];
    const packed = torch.noGrad(() => torch.tidy(() => model.logits(model.forwardBatch({ inputIds, imageGridThw: [] }).hidden).toFloat32Array()));
    const w = model.weights.get("model.layers.1.mlp.up_proj.weight")!;
    const q = model.weights.get("model.layers.0.self_attn.q_proj.weight")!;
    w.requiresGrad_(true);
    q.requiresGrad_(true);
    try {
      const viewed = torch.tidy(() => {
        const out = model.logits(model.forwardBatch({ inputIds, imageGridThw: [] }).hidden);
        out.sum().backward();
        return out.detach().toFloat32Array();
      });
      expect(maxRelativeError(Float64Array.from(viewed), Float64Array.from(packed))).toBeLessThan(1e-5);
      for (const t of [w, q]) {
        torch.tidy(() => {
          const g = t.grad;
          expect(g).toBeDefined();
          expect(g!.abs().sum().item()).toBeGreaterThan(0);
        });
      }
    } finally {
      for (const t of [w, q]) {
        t.grad = undefined;
        t.requiresGrad_(false);
      }
    }
  });
});

describe("Qwen2.5-VL tiny, bf16", () => {
  test("logits are within bf16 rounding of transformers' bf16 logits", () => {
    const bf16 = Qwen25VLModel.load(FIXTURE_DIR, { device: "cpu", dtype: "bf16" });
    try {
      for (const name of SINGLE_CASES) {
        // transformers' bf16 is itself this far from its f32; we must be no further than twice that.
        const scale = bf16RoundingScale(name);
        expect(scale).toBeGreaterThan(1e-3);
        expect(scale).toBeLessThan(3e-2);
        expect(caseError(bf16, name, FIXTURE_DIR, "logits_bf16")).toBeLessThan(2 * scale);
        expect(caseError(bf16, name, FIXTURE_DIR, "logits")).toBeLessThan(2 * scale);
      }
    } finally {
      bf16.dispose();
    }
  });
});

describe("Qwen2.5-VL pieces", () => {
  test("a KV-cached decode step equals the full forward", () => {
    const ids = refRows("text.input_ids");
    const T = ids[0]!.length;
    const [full, stepped] = torch.noGrad(() =>
      torch.tidy(() => {
        const all = model.forwardBatch({ inputIds: ids });
        const fullLast = model.logits(all.hidden.narrow(1, T - 1, 1));
        const cache = new ConcatKVCache(model.config.text.numLayers);
        const prefix = ids.map((r) => r.slice(0, T - 1));
        const pre = model.forwardBatch({ inputIds: prefix }, { kvCache: cache });
        const pos = torch.tensor([pre.nextPositions[0]!, pre.nextPositions[0]!, pre.nextPositions[0]!], [3, 1, 1], { dtype: "i64" });
        const h = model.forward({ inputsEmbeds: model.embed([[ids[0]![T - 1]!]]), positionIds: pos, kvCache: cache });
        const out = [fullLast.toArray() as Float32Array, model.logits(h).toArray() as Float32Array];
        cache.dispose();
        return out;
      }),
    );
    expect(maxRelativeError(stepped!, full!)).toBeLessThan(1e-5);
  });

  test("an attention hook replaces the built-in attention, layer by layer", () => {
    const ids = refRows("text.input_ids");
    const layers: number[] = [];
    const hook = {
      attend(layer: number, q: Tensor, k: Tensor, v: Tensor): Tensor {
        layers.push(layer);
        return F.scaledDotProductAttention(q, k, v, { isCausal: true, enableGqa: true });
      },
    };
    const [plain, hooked] = torch.noGrad(() =>
      torch.tidy(() => {
        const embeds = model.embed(ids);
        const { positionIds } = model.positionIds(ids, undefined, []);
        return [model.forward({ inputsEmbeds: embeds, positionIds }).toArray() as Float32Array, model.forward({ inputsEmbeds: embeds, positionIds, attention: hook }).toArray() as Float32Array];
      }),
    );
    expect(layers).toEqual([0, 1]);
    expect(maxRelativeError(hooked!, plain!)).toBeLessThan(1e-6);
  });

  test("outside any scope, encodeImages / forward / forwardBatch leave only their results alive", () => {
    torch.noGrad(() => {
      const pixels = refTensor("one_image.pixel_values");
      const ids = refRows("text.input_ids");
      const embeds = model.embed(ids);
      const { positionIds } = model.positionIds(ids, undefined, []);
      const before = torch.liveTensors();
      const features = model.encodeImages(pixels, grids("one_image.image_grid_thw"));
      expect(torch.liveTensors()).toBe(before + 1);
      const hidden = model.forward({ inputsEmbeds: embeds, positionIds });
      expect(torch.liveTensors()).toBe(before + 2);
      const batch = model.forwardBatch({ inputIds: refRows("one_image.input_ids"), pixelValues: pixels, imageGridThw: grids("one_image.image_grid_thw") });
      expect(torch.liveTensors()).toBe(before + 4); // hidden + position ids
      for (const t of [pixels, embeds, positionIds, features, hidden, batch.hidden, batch.positionIds]) t.dispose();
    });
  });

  test("image features and image tokens must agree", () => {
    const ids = refRows("one_image.input_ids");
    expect(() =>
      torch.tidy(() => model.forwardBatch({ inputIds: ids, pixelValues: refTensor("two_images.pixel_values"), imageGridThw: grids("two_images.image_grid_thw") })),
    ).toThrow(/image features and image tokens do not match/);
    expect(() => torch.tidy(() => model.forwardBatch({ inputIds: ids }))).toThrow(/without its images/);
  });

  test("the value head gives one scalar per token and gradients reach the weights", () => {
    const head = model.newValueHead({ seed: 3 });
    const embed = model.weights.get("model.embed_tokens.weight")!;
    const patch = model.weights.get("visual.patch_embed.proj.weight")!;
    embed.requiresGrad_(true);
    patch.requiresGrad_(true);
    head.weight.requiresGrad_(true);
    try {
      torch.tidy(() => {
        const out = model.forwardBatch({
          inputIds: refRows("one_image.input_ids"),
          pixelValues: refTensor("one_image.pixel_values"),
          imageGridThw: grids("one_image.image_grid_thw"),
        });
        const values = model.values(out.hidden, head);
        expect(values.shape).toEqual([1, refs.cases.one_image!.input_ids!.length]);
        values.sum().backward();
        for (const t of [head.weight, embed, patch]) {
          const g = t.grad!;
          expect(g.shape).toEqual(t.shape);
          expect(g.abs().sum().item()).toBeGreaterThan(0);
        }
      });
    } finally {
      for (const t of [embed, patch, head.weight]) {
        t.grad?.dispose();
        t.requiresGrad_(false);
      }
      head.weight.dispose();
      head.bias.dispose();
    }
  });
});

