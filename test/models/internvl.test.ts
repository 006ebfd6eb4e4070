/**
 * Parity of vagen's InternVL family with transformers on the committed tiny model
 * (test/fixtures/internvl_tiny, made by its make_fixture.py; CPU, f32): the chat template
 * and the <img><IMG_CONTEXT>...</img> expansion, the dynamic tiling's pixels, the vision
 * tower's projected features, logits through the training forward (one prompt at a time
 * and a left-padded batch), 12 greedy tokens through the engine from the chat messages
 * (prefill chunks small enough that an image spans several), and the engine's sampling
 * log-probs against the training forward's. Config refusals name the file and key.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { join } from "node:path";
import { VagenError } from "../../src/core/errors.ts";
import { loadEngine } from "../../src/engine/load.ts";
import { parseInternVLConfig, type TilingOptions } from "../../src/models/internvl/config.ts";
import { InternVLChatModel } from "../../src/models/internvl/chat-model.ts";
import { tileGrid, tileImages } from "../../src/models/internvl/tiling.ts";
import { canonicalInternVLName, internVLCheckpointName, internVLPeftModuleName } from "../../src/models/internvl/weights.ts";
import { exportWeightNamer, loadModelFamily, peftModuleNamer } from "../../src/models/index.ts";
import { imageTokensOf } from "../../src/models/internvl/processor.ts";
import { readJson, TextTokenizer } from "../../src/models/tokenizer.ts";
import * as torch from "../../src/torch/index.ts";
import { compareLogprobs, textMessages } from "../engine/logprob-check.ts";
import { fixtureMessages, maxRelativeError, ref, refsJson } from "./fixture.ts";

const DIR = join(import.meta.dir, "..", "fixtures", "internvl_tiny");
const CASES = ["text", "one_image", "two_images", "image_after_text", "three_turns"] as const;
const IMAGE_CASES = CASES.filter((c) => c !== "text");
const refs = refsJson(DIR) as unknown as {
  cases: Record<string, { input_ids: number[]; greedy: number[]; num_patches: number[]; prompt_text: string }>;
  saved_config: Record<string, unknown>;
  state_dict_keys: string[];
};

let family: InternVLChatModel;
let ledger: { leaked(): number };

beforeAll(() => {
  torch.loadTorch();
  ledger = torch.tensorLedger();
  family = loadModelFamily(DIR, { device: "cpu", dtype: "f32" }) as InternVLChatModel;
});

afterAll(() => {
  family.dispose();
  expect(ledger.leaked()).toBe(0);
});

function rows(name: string): number[][] {
  const r = ref(name, DIR);
  const [B, T] = [r.shape[0]!, r.shape[1]!];
  return Array.from({ length: B }, (_, b) => Array.from(r.values.subarray(b * T, (b + 1) * T)));
}

function caseImages(name: string) {
  return fixtureMessages(DIR, name).flatMap((m) => m.content.flatMap((p) => (p.type === "image" ? [p.image] : [])));
}

function trainingLogits(inputIds: number[][], images: ReturnType<typeof caseImages>[], attentionMask?: number[][]): Float64Array {
  return torch.noGrad(() => torch.tidy(() => Float64Array.from(family.logits(family.forwardForTraining({ inputIds, attentionMask, images })).toFloat32Array())));
}

function refusal(patch: (cfg: Record<string, any>) => void): string {
  const cfg = structuredClone(refs.saved_config) as Record<string, any>;
  patch(cfg);
  try {
    parseInternVLConfig(cfg, "MODEL/config.json");
  } catch (err) {
    expect(err).toBeInstanceOf(VagenError);
    return (err as Error).message;
  }
  throw new Error("the config was accepted");
}

describe("InternVL config", () => {
  test("the saved config normalises: Qwen3 decoder settings, 9 tokens a 48-pixel tile, untied head", () => {
    const c = parseInternVLConfig(refs.saved_config);
    expect(c.text).toMatchObject({ numLayers: 2, numHeads: 4, numKvHeads: 2, headDim: 32, qkNorm: true, qkvBias: false, ropeSections: [16], ropeTheta: 1e6, tieWordEmbeddings: false });
    expect(c.vision).toMatchObject({ imageSize: 48, patchSize: 8, gridSide: 6, attentionBias: true, headDim: 16 });
    expect([c.shuffle, c.tokensPerTile]).toEqual([2, 9]);
    // transformers' InternVLConfig ties the head unless the top level says otherwise.
    const untold = structuredClone(refs.saved_config) as Record<string, unknown>;
    delete untold.tie_word_embeddings;
    expect(parseInternVLConfig(untold).text.tieWordEmbeddings).toBe(true);
  });

  test("refusals name the file, the key and what was expected", () => {
    expect(refusal((c) => (c.text_config.model_type = "qwen2"))).toContain('MODEL/config.json: key "text_config.model_type": got "qwen2", expected "qwen3"');
    expect(refusal((c) => (c.vision_config.norm_type = "rms_norm"))).toContain('key "vision_config.norm_type": got "rms_norm", expected "layer_norm"');
    expect(refusal((c) => (c.vision_config.use_qk_norm = true))).toContain('key "vision_config.use_qk_norm"');
    expect(refusal((c) => (c.vision_feature_layer = -2))).toContain('key "vision_feature_layer": got -2, expected -1');
    expect(refusal((c) => (c.vision_feature_select_strategy = "full"))).toContain('key "vision_feature_select_strategy"');
    expect(refusal((c) => (c.image_seq_length = 256))).toContain('key "image_seq_length": got 256, expected 9');
    expect(refusal((c) => (c.downsample_ratio = 0.3))).toContain('key "downsample_ratio"');
    expect(refusal((c) => (c.vision_config.image_size = [48, 32]))).toContain('key "vision_config.image_size"');
    expect(refusal((c) => (c.text_config.attention_bias = true))).toContain('MODEL/config.json (text_config): key "attention_bias"');
    expect(refusal((c) => (c.text_config.rope_parameters = { rope_type: "yarn", rope_theta: 1e6 }))).toContain('"rope_parameters.rope_type": got "yarn"');
  });

  test("checkpoint names both ways, PEFT names and the registry's namers", () => {
    for (const name of refs.state_dict_keys) expect(internVLCheckpointName(canonicalInternVLName(name, false)!)).toBe(name);
    expect(canonicalInternVLName("model.language_model.layers.0.mlp.up_proj.weight", false)).toBe("model.layers.0.mlp.up_proj.weight");
    expect(canonicalInternVLName("model.vision_tower.encoder.layer.1.lambda_2", false)).toBe("vision_tower.encoder.layer.1.lambda_2");
    expect(canonicalInternVLName("lm_head.weight", true)).toBeUndefined();
    // transformers 5's save_pretrained layout (the fixture's model.safetensors) maps onto the same names.
    expect(canonicalInternVLName("language_model.model.layers.0.self_attn.q_norm.weight", false)).toBe("model.layers.0.self_attn.q_norm.weight");
    expect(canonicalInternVLName("language_model.lm_head.weight", false)).toBe("lm_head.weight");
    expect(canonicalInternVLName("language_model.lm_head.weight", true)).toBeUndefined();
    expect(canonicalInternVLName("vision_tower.embeddings.cls_token", false)).toBe("vision_tower.embeddings.cls_token");
    expect(internVLPeftModuleName("model.layers.1.self_attn.q_proj")).toBe("model.language_model.layers.1.self_attn.q_proj");
    expect(exportWeightNamer(DIR)("multi_modal_projector.linear_1.weight")).toBe("model.multi_modal_projector.linear_1.weight");
    expect(peftModuleNamer(DIR)("model.layers.0.mlp.down_proj")).toBe("model.language_model.layers.0.mlp.down_proj");
  });
});

describe("InternVL tiny, f32 on the CPU, against transformers", () => {
  test("the registry loads model_type internvl: one rotary axis, vision weights, image tokens never sampled", () => {
    expect(family).toBeInstanceOf(InternVLChatModel);
    expect(family.family).toBe("internvl");
    expect(family.spec).toMatchObject({ numLayers: 2, numHeads: 4, numKvHeads: 2, headDim: 32, hiddenSize: 64, positionAxes: 1, maxPositions: 4096 });
    expect(family.isVisionWeight("vision_tower.embeddings.cls_token")).toBe(true);
    expect(family.isVisionWeight("multi_modal_projector.linear_2.weight")).toBe(true);
    expect(family.isVisionWeight("model.embed_tokens.weight")).toBe(false);
    const tok = family.tokenizer;
    expect([...family.visionTokenIds].sort()).toEqual(["<IMG_CONTEXT>", "<img>", "</img>", "<video>"].map((t) => tok.tokenId(t)).sort());
    expect(family.weights.size).toBe(refs.state_dict_keys.length);
  });

  test("tile canvases follow get_optimal_tiled_canvas: square and small stays one tile, ties prefer more tiles when the image is large", () => {
    const opts: TilingOptions = { ...family.tiling };
    expect(tileGrid(96, 64, opts)).toEqual([3, 2]);
    expect(tileGrid(40, 40, opts)).toEqual([1, 1]);
    expect(tileGrid(200, 150, opts)).toEqual([4, 3]);
    expect(tileGrid(50, 90, opts)).toEqual([1, 2]);
    // A square image over half of a 2 x 2 canvas takes it: 4 tiles and a thumbnail.
    expect(tileGrid(80, 80, opts)).toEqual([2, 2]);
    expect(tileGrid(100, 100, { ...opts, maxTiles: 1 })).toEqual([1, 1]);
    expect(tileGrid(300, 40, { ...opts, minTiles: 2, maxTiles: 6 })).toEqual([6, 1]);
  });

  for (const name of CASES) {
    test(`${name}: the prompt is rendered and expanded to transformers' ids`, () => {
      const c = refs.cases[name]!;
      const prompt = family.buildPrompt(fixtureMessages(DIR, name));
      expect(prompt.tokenIds).toEqual(c.input_ids);
      const tiles = prompt.images.map((i) => i.length / 9);
      expect(tiles).toEqual(c.num_patches);
      for (const image of prompt.images) {
        expect(prompt.tokenIds[image.offset - 1]).toBe(family.tokenizer.tokenId("<img>"));
        expect(prompt.tokenIds[image.offset + image.length]).toBe(family.tokenizer.tokenId("</img>"));
      }
    });
  }

  for (const name of IMAGE_CASES) {
    test(`${name}: tiles equal the reference processor's pixel values, and the projected features the model's`, () => {
      const tiled = tileImages(caseImages(name), family.tiling);
      const expected = ref(`${name}.pixel_values`, DIR);
      expect([tiled.numTiles, 3, 48, 48]).toEqual(expected.shape);
      let maxDiff = 0;
      for (let i = 0; i < expected.values.length; i++) maxDiff = Math.max(maxDiff, Math.abs(tiled.pixelValues[i]! - expected.values[i]!));
      expect(maxDiff).toBeLessThan(1e-6);
      torch.noGrad(() =>
        torch.tidy(() => {
          const features = family.model.encodeTiles(torch.tensor(Float32Array.from(expected.values), expected.shape, { dtype: "f32" }));
          expect(maxRelativeError(features.toFloat32Array(), ref(`${name}.image_features`, DIR).values)).toBeLessThan(1e-5);
        }),
      );
    });
  }

  for (const name of CASES) {
    test(`${name}: training-forward logits within 1e-4 of transformers'`, () => {
      const logits = trainingLogits(rows(`${name}.input_ids`), [caseImages(name)]);
      const error = maxRelativeError(logits, ref(`${name}.logits`, DIR).values);
      process.stdout.write(`internvl ${name}: logits relative error ${error.toExponential(2)}\n`);
      expect(error).toBeLessThan(1e-4);
      // The greedy continuation of the whole prompt starts with the reference's first token.
      const V = family.spec.vocabSize;
      const last = logits.subarray(logits.length - V);
      expect(last.indexOf(Math.max(...last))).toBe(refs.cases[name]!.greedy[0]!);
    });
  }

  test("a left-padded batch of three rows: logits at every real token within 1e-4", () => {
    const mask = rows("batch_left.attention_mask");
    const actual = trainingLogits(rows("batch_left.input_ids"), ["text", "one_image", "two_images"].map(caseImages), mask);
    const expected = ref("batch_left.logits", DIR);
    const [B, T, V] = expected.shape as [number, number, number];
    const a: number[] = [];
    const e: number[] = [];
    for (let b = 0; b < B; b++) {
      for (let t = 0; t < T; t++) {
        if (!mask[b]![t]) continue;
        for (let v = 0; v < V; v++) a.push(actual[(b * T + t) * V + v]!), e.push(expected.values[(b * T + t) * V + v]!);
      }
    }
    expect(maxRelativeError(a, e)).toBeLessThan(1e-4);
  });

  test("a training row whose image tokens are not its images' is refused, naming the row", () => {
    const ids = rows("one_image.input_ids");
    expect(() => family.forwardForTraining({ inputIds: ids, images: [caseImages("image_after_text")] })).toThrow("training batch row 0: 63 image token(s), but its 1 image(s) make 27");
  });

  test("the engine gives transformers' 12 greedy tokens from the chat messages, every image encoded once", async () => {
    // Prefill steps of 16 tokens: every image's placeholders (27 to 117) span several chunks.
    const loaded = loadEngine(DIR, { device: "cpu", dtype: "f32", max_seq_len: 320, kv_cache_gib: 0.01, max_slots: 8, max_prefill_tokens: 16 });
    try {
      const model = loaded.model as InternVLChatModel;
      const results = await Promise.all(
        CASES.map((name) =>
          loaded.engine.generate({ prompt: model.buildPrompt(fixtureMessages(DIR, name)), sampling: { temperature: 0, maxNewTokens: 12, ignoreStopTokens: true } }),
        ),
      );
      results.forEach((r, i) => expect(r.tokenIds).toEqual(refs.cases[CASES[i]!]!.greedy));
      expect(model.imagesEncoded).toBe(IMAGE_CASES.reduce((n, c) => n + caseImages(c).length, 0));
    } finally {
      await loaded.close();
    }
  }, 60_000);
});

describe("InternVL engine sampling log-probs = training forward log-probs (CPU, f32)", () => {
  test("image and text prompts, batched, at temperature 1 and 0.7", async () => {
    const loaded = loadEngine(DIR, { device: "cpu", dtype: "f32", max_seq_len: 512, kv_cache_gib: 0.05, max_slots: 8 });
    try {
      const messages = [...IMAGE_CASES.map((name) => fixtureMessages(DIR, name)), textMessages("Describe a sunny day.")];
      const r = await compareLogprobs(loaded, messages, { temperature: 1, maxNewTokens: 8 });
      expect(r.results.reduce((n, g) => n + g.tokenIds.length, 0)).toBeGreaterThan(messages.length);
      r.results.forEach((g, b) => expect(r.recomputed[b]!.length).toBe(g.logprobs.length));
      expect(r.maxAbsDiff).toBeLessThan(1e-4);
      expect(r.gradNorm).toBeGreaterThan(0);
      const tempered = await compareLogprobs(loaded, [fixtureMessages(DIR, "two_images")], { temperature: 0.7, maxNewTokens: 6 });
      expect(tempered.maxAbsDiff).toBeLessThan(1e-4);
      process.stdout.write(`internvl log-prob |engine - training| max ${r.maxAbsDiff.toExponential(2)} (T=0.7: ${tempered.maxAbsDiff.toExponential(2)})\n`);
    } finally {
      await loaded.close();
    }
  }, 60_000);
});

test("the image tokens come from tokenizer_config.json's top level (transformers 5) or its extra_special_tokens (4.x)", () => {
  const cfg = readJson(join(DIR, "tokenizer_config.json"));
  expect([cfg.context_image_token, cfg.start_image_token, cfg.end_image_token]).toEqual(["<IMG_CONTEXT>", "<img>", "</img>"]);
  const tokenizer = readJson(join(DIR, "tokenizer.json"));
  const older = new TextTokenizer({ tokenizer, config: { extra_special_tokens: { context_image_token: "<ctx>", start_image_token: "<s>", end_image_token: "</s>" } } });
  expect(imageTokensOf(older)).toEqual({ context: "<ctx>", start: "<s>", end: "</s>" });
  expect(imageTokensOf(new TextTokenizer({ tokenizer, config: {} }))).toEqual({ context: "<IMG_CONTEXT>", start: "<img>", end: "</img>" });
});
