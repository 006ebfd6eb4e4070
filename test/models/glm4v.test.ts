/**
 * Parity of vagen's GLM-4V family (model_type glm4v: GLM-4.1V, GLM-4.6V-Flash) with
 * transformers on the committed tiny model (test/fixtures/glm4v_tiny, made by its
 * make_fixture.py; CPU, f32): the chat template and image-token expansion, GLM's image
 * processor (its own resize rule) pixels and grids, the rope index, the vision tower's
 * merged features, logits through the training forward (one prompt at a time and a
 * left-padded batch), 12 greedy tokens through the engine from the chat messages, the
 * engine's sampling log-probs against the training forward's, and config refusals.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { loadEngine } from "../../src/engine/load.ts";
import { compareLogprobs, textMessages } from "../engine/logprob-check.ts";
import { loadModelFamily } from "../../src/models/index.ts";
import { Glm4vChatModel } from "../../src/models/glm4v/chat-model.ts";
import { parseGlm4vConfig } from "../../src/models/glm4v/config.ts";
import { glm4vSmartResize, processGlm4vImages } from "../../src/models/glm4v/image-processor.ts";
import { rotaryOrder } from "../../src/models/decoder.ts";
import * as torch from "../../src/torch/index.ts";
import { fixtureMessages, maxRelativeError, ref, refsJson } from "./fixture.ts";

const DIR = join(import.meta.dir, "..", "fixtures", "glm4v_tiny");
const CASES = ["text", "one_image", "two_images", "image_after_text", "three_turns"] as const;
const IMAGE_CASES = CASES.filter((c) => c !== "text");
const refs = refsJson(DIR);

let family: Glm4vChatModel;
let ledger: { leaked(): number };

beforeAll(() => {
  torch.loadTorch();
  ledger = torch.tensorLedger();
  family = loadModelFamily(DIR, { device: "cpu", dtype: "f32" }) as Glm4vChatModel;
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

/** The case's images, in placeholder order. */
function caseImages(name: string) {
  return fixtureMessages(DIR, name).flatMap((m) => m.content.flatMap((p) => (p.type === "image" ? [p.image] : [])));
}

/** Logits (float64, flattened) of the training forward on a padded batch. */
function trainingLogits(inputIds: number[][], images: ReturnType<typeof caseImages>[], attentionMask?: number[][]): Float64Array {
  return torch.noGrad(() => torch.tidy(() => Float64Array.from(family.logits(family.forwardForTraining({ inputIds, attentionMask, images })).toFloat32Array())));
}

describe("GLM-4V tiny, f32 on the CPU, against transformers", () => {
  test("the registry loads model_type glm4v: partial rotary on adjacent pairs, fused gate_up_proj, sandwich norms", () => {
    expect(family).toBeInstanceOf(Glm4vChatModel);
    expect(family.family).toBe("glm4v");
    expect(family.spec).toMatchObject({ numLayers: 2, numHeads: 4, numKvHeads: 2, headDim: 32, hiddenSize: 128, positionAxes: 3, maxPositions: 4096 });
    expect(family.model.config.text.rotaryDim).toBe(16);
    expect(family.weights.get("model.layers.1.mlp.gate_up_proj.weight")!.shape).toEqual([320, 128]);
    expect(family.weights.has("model.layers.1.mlp.gate_proj.weight")).toBe(false);
    expect(family.weights.get("model.layers.0.post_self_attn_layernorm.weight")!.shape).toEqual([128]);
    expect(family.weights.get("visual.embeddings.position_embedding.weight")!.shape).toEqual([36, 32]);
    expect(family.isVisionWeight("visual.downsample.weight")).toBe(true);
    expect(family.isVisionWeight("model.embed_tokens.weight")).toBe(false);
    expect(family.visionTokenIds).toContain(family.model.config.imageTokenId);
    // GLM ends a turn at the next role header: generation_config.json's ids.
    const generation = JSON.parse(readFileSync(join(DIR, "generation_config.json"), "utf8")) as { eos_token_id: number[] };
    for (const id of generation.eos_token_id) expect(family.eosTokenIds).toContain(id);
  });

  test("the rotary order puts adjacent pairs at (i, i + headDim / 2) and the unrotated dimensions between", () => {
    expect(rotaryOrder(8, 8, "halves")).toBeUndefined();
    expect(Array.from(rotaryOrder(8, 4, "adjacent")!)).toEqual([0, 2, 4, 5, 1, 3, 6, 7]);
    expect(Array.from(rotaryOrder(8, 8, "adjacent")!)).toEqual([0, 2, 4, 6, 1, 3, 5, 7]);
    expect(Array.from(rotaryOrder(8, 4, "halves")!)).toEqual([0, 1, 4, 5, 2, 3, 6, 7]);
  });

  test("GLM's smart resize: a short side scales up first, the bounds count both temporal frames", () => {
    // 70 x 20: 20 < 28 scales by 1.4 to 98 x 28; 98 / 28 = 3.5 rounds half to even, to 4.
    expect(glm4vSmartResize(20, 70, 28, 2, 2 * 56 * 56, 2 * 112 * 84)).toEqual([28, 112]);
    // 112 x 84 counts 2 * 112 * 84 = max: kept.
    expect(glm4vSmartResize(84, 112, 28, 2, 2 * 56 * 56, 2 * 112 * 84)).toEqual([84, 112]);
    // 40 x 40 counts 2 * 28 * 28 < min: scaled up to 56 x 56.
    expect(glm4vSmartResize(40, 40, 28, 2, 2 * 56 * 56, 2 * 112 * 84)).toEqual([56, 56]);
  });

  for (const name of CASES) {
    test(`${name}: the prompt is rendered and expanded to transformers' ids`, () => {
      const c = refs.cases[name]!;
      const prompt = family.buildPrompt(fixtureMessages(DIR, name));
      expect(prompt.tokenIds).toEqual(c.input_ids!);
      expect(prompt.images.map((i) => i.grid)).toEqual(name === "text" ? [] : rows(`${name}.image_grid_thw`));
    });
  }

  for (const name of IMAGE_CASES) {
    test(`${name}: pixel values and grids equal the reference processor's`, () => {
      const processed = processGlm4vImages(caseImages(name), family.imageOptions);
      const expected = ref(`${name}.pixel_values`, DIR);
      expect([processed.numPatches, processed.patchDim]).toEqual(expected.shape);
      expect(processed.gridThw).toEqual(rows(`${name}.image_grid_thw`) as [number, number, number][]);
      let maxDiff = 0;
      for (let i = 0; i < expected.values.length; i++) maxDiff = Math.max(maxDiff, Math.abs(processed.pixelValues[i]! - expected.values[i]!));
      expect(maxDiff).toBeLessThan(1e-5);
    });

    test(`${name}: rope positions equal get_rope_index's`, () => {
      const prompt = family.buildPrompt(fixtureMessages(DIR, name));
      expect(family.promptPositions(prompt).flat()).toEqual(Array.from(ref(`${name}.position_ids`, DIR).values));
    });

    test(`${name}: merged image features match the vision tower's`, () => {
      torch.noGrad(() =>
        torch.tidy(() => {
          const pixels = ref(`${name}.pixel_values`, DIR);
          const features = family.model.encodeImages(torch.tensor(Float32Array.from(pixels.values), pixels.shape, { dtype: "f32" }), rows(`${name}.image_grid_thw`));
          const error = maxRelativeError(features.toFloat32Array(), ref(`${name}.image_features`, DIR).values);
          process.stdout.write(`glm4v ${name}: image features relative error ${error.toExponential(2)}\n`);
          expect(error).toBeLessThan(1e-5);
        }),
      );
    });
  }

  for (const name of CASES) {
    test(`${name}: training-forward logits within 1e-4 of transformers'`, () => {
      const logits = trainingLogits(rows(`${name}.input_ids`), [caseImages(name)]);
      const error = maxRelativeError(logits, ref(`${name}.logits`, DIR).values);
      process.stdout.write(`glm4v ${name}: logits relative error ${error.toExponential(2)}\n`);
      expect(error).toBeLessThan(1e-4);
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

  test("the engine gives transformers' 12 greedy tokens from the chat messages, every image encoded once", async () => {
    // Prefill steps of 16 tokens (the engine's smallest): images straddle chunk boundaries.
    const chunk = 16;
    const straddling = CASES.flatMap((name) => family.buildPrompt(fixtureMessages(DIR, name)).images).filter((i) => Math.floor(i.offset / chunk) !== Math.floor((i.offset + i.length - 1) / chunk));
    expect(straddling.length).toBeGreaterThan(0);
    const loaded = loadEngine(DIR, { device: "cpu", dtype: "f32", max_seq_len: 256, kv_cache_gib: 0.01, max_slots: 8, max_prefill_tokens: chunk });
    try {
      const model = loaded.model as Glm4vChatModel;
      const results = await Promise.all(
        CASES.map((name) =>
          loaded.engine.generate({ prompt: model.buildPrompt(fixtureMessages(DIR, name)), sampling: { temperature: 0, maxNewTokens: 12, ignoreStopTokens: true } }),
        ),
      );
      results.forEach((r, i) => expect(r.tokenIds).toEqual(refs.cases[CASES[i]!]!.greedy!));
      expect(model.imagesEncoded).toBe(IMAGE_CASES.reduce((n, c) => n + caseImages(c).length, 0));
    } finally {
      await loaded.close();
    }
  }, 60_000);
});

describe("GLM-4V engine sampling log-probs = training forward log-probs (CPU, f32)", () => {
  test("image and text prompts, batched, at temperature 1 and 0.7", async () => {
    const loaded = loadEngine(DIR, { device: "cpu", dtype: "f32", max_seq_len: 512, kv_cache_gib: 0.05, max_slots: 8 });
    try {
      // Seeds 100.. (compareLogprobs) sample no image token from these prompts in this order: a
      // sampled image token would be an image placeholder without an image in the training forward.
      const messages = [textMessages("Describe a sunny day."), ...IMAGE_CASES.map((name) => fixtureMessages(DIR, name))];
      const r = await compareLogprobs(loaded, messages, { temperature: 1, maxNewTokens: 8 });
      expect(r.results.reduce((n, g) => n + g.tokenIds.length, 0)).toBeGreaterThan(messages.length);
      r.results.forEach((g, b) => expect(r.recomputed[b]!.length).toBe(g.logprobs.length));
      expect(r.maxAbsDiff).toBeLessThan(1e-4);
      expect(r.gradNorm).toBeGreaterThan(0);
      const tempered = await compareLogprobs(loaded, [fixtureMessages(DIR, "two_images")], { temperature: 0.7, maxNewTokens: 6 });
      expect(tempered.maxAbsDiff).toBeLessThan(1e-4);
      process.stdout.write(`glm4v log-prob |engine - training| max ${r.maxAbsDiff.toExponential(2)} (T=0.7: ${tempered.maxAbsDiff.toExponential(2)})\n`);
    } finally {
      await loaded.close();
    }
  }, 60_000);
});

describe("GLM-4V config.json refusals name the file and key", () => {
  const saved = JSON.parse(readFileSync(join(DIR, "config.json"), "utf8")) as Record<string, any>;
  const withText = (patch: Record<string, unknown>) => ({ ...saved, text_config: { ...saved.text_config, ...patch } });

  test("the fixture's config (transformers 5 layout) and the 4.5x layout parse alike", () => {
    const five = parseGlm4vConfig(saved, "MODEL/config.json");
    const { rope_parameters: rope, ...rest } = saved.text_config;
    const legacy = parseGlm4vConfig(
      { ...saved, text_config: { ...rest, rope_theta: rope.rope_theta, partial_rotary_factor: rope.partial_rotary_factor, rope_scaling: { type: "default", mrope_section: rope.mrope_section } } },
      "MODEL/config.json",
    );
    expect(legacy).toEqual(five);
    expect(five.text).toMatchObject({ headDim: 32, rotaryDim: 16, mropeSection: [2, 3, 3], ropeTheta: 10000 });
    expect(five.vision).toMatchObject({ positionGridSide: 6, headDim: 16, attentionBias: true });
  });

  test("mrope_section that does not sum to the rotary pairs", () => {
    const raw = withText({ rope_parameters: { ...saved.text_config.rope_parameters, mrope_section: [4, 6, 6] } });
    expect(() => parseGlm4vConfig(raw, "MODEL/config.json")).toThrow(/MODEL\/config\.json: key "text_config\.rope_parameters\.mrope_section".*sum to .* = 8/);
  });

  test("scaled rope types, attention without biases, other activations, a vision width the decoder cannot take", () => {
    expect(() => parseGlm4vConfig(withText({ rope_parameters: { ...saved.text_config.rope_parameters, rope_type: "yarn" } }), "MODEL/config.json")).toThrow(
      /MODEL\/config\.json: key "text_config\.rope_parameters\.rope_type": expected "default", got "yarn"/,
    );
    expect(() => parseGlm4vConfig(withText({ attention_bias: false }), "MODEL/config.json")).toThrow(/MODEL\/config\.json \(text_config\).*attention_bias/);
    expect(() => parseGlm4vConfig(withText({ hidden_act: "gelu" }), "MODEL/config.json")).toThrow(/MODEL\/config\.json \(text_config\).*hidden_act/);
    expect(() => parseGlm4vConfig({ ...saved, vision_config: { ...saved.vision_config, out_hidden_size: 64 } }, "MODEL/config.json")).toThrow(
      /MODEL\/config\.json: key "vision_config\.out_hidden_size": expected text_config\.hidden_size \(128\), got 64/,
    );
    expect(() => parseGlm4vConfig({ ...saved, vision_config: { ...saved.vision_config, image_size: 90 } }, "MODEL/config.json")).toThrow(/key "vision_config\.image_size"/);
  });
});
