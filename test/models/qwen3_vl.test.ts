/**
 * Parity of vagen's Qwen3-VL family with transformers on the committed tiny model
 * (test/fixtures/qwen3_vl_tiny, made by its make_fixture.py; CPU, f32): the chat template
 * and image-pad expansion, the image processor's pixels and grids, the rope index, the
 * vision tower's merger and deepstack features, logits through the training forward
 * (one prompt at a time and a left-padded batch), 12 greedy tokens through the engine
 * from the chat messages, and the engine's sampling log-probs against the training
 * forward's.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { join } from "node:path";
import { loadEngine } from "../../src/engine/load.ts";
import { compareLogprobs, textMessages } from "../engine/logprob-check.ts";
import { processImages } from "../../src/models/image-processor.ts";
import { loadModelFamily } from "../../src/models/index.ts";
import { Qwen3VLChatModel } from "../../src/models/qwen3_vl/chat-model.ts";
import * as torch from "../../src/torch/index.ts";
import { fixtureMessages, maxRelativeError, ref, refsJson } from "./fixture.ts";

const DIR = join(import.meta.dir, "..", "fixtures", "qwen3_vl_tiny");
const CASES = ["text", "one_image", "two_images", "image_after_text", "three_turns"] as const;
const IMAGE_CASES = CASES.filter((c) => c !== "text");
const refs = refsJson(DIR);

let family: Qwen3VLChatModel;
let ledger: { leaked(): number };

beforeAll(() => {
  torch.loadTorch();
  ledger = torch.tensorLedger();
  family = loadModelFamily(DIR, { device: "cpu", dtype: "f32" }) as Qwen3VLChatModel;
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

describe("Qwen3-VL tiny, f32 on the CPU, against transformers", () => {
  test("the registry loads model_type qwen3_vl: three rotary axes, head_dim from config, deepstack mergers", () => {
    expect(family).toBeInstanceOf(Qwen3VLChatModel);
    expect(family.family).toBe("qwen3_vl");
    expect(family.spec).toMatchObject({ numLayers: 3, numHeads: 4, numKvHeads: 2, headDim: 32, hiddenSize: 64, positionAxes: 3, maxPositions: 4096 });
    expect(family.model.config.vision.deepstackIndexes).toEqual([0, 1]);
    expect(family.weights.get("model.layers.2.self_attn.q_norm.weight")!.shape).toEqual([32]);
    expect(family.weights.get("visual.deepstack_merger_list.1.norm.weight")!.shape).toEqual([128]);
    expect(family.isVisionWeight("visual.pos_embed.weight")).toBe(true);
    expect(family.isVisionWeight("model.embed_tokens.weight")).toBe(false);
    expect(family.visionTokenIds).toContain(family.model.config.imageTokenId);
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
      const processed = processImages(caseImages(name), family.imageOptions);
      const expected = ref(`${name}.pixel_values`, DIR);
      expect([processed.numPatches, processed.patchDim]).toEqual(expected.shape);
      expect(processed.gridThw).toEqual(rows(`${name}.image_grid_thw`) as [number, number, number][]);
      let maxDiff = 0;
      for (let i = 0; i < expected.values.length; i++) maxDiff = Math.max(maxDiff, Math.abs(processed.pixelValues[i]! - expected.values[i]!));
      expect(maxDiff).toBeLessThan(1e-6);
    });

    test(`${name}: rope positions equal get_rope_index's`, () => {
      const prompt = family.buildPrompt(fixtureMessages(DIR, name));
      expect(family.promptPositions(prompt).flat()).toEqual(Array.from(ref(`${name}.position_ids`, DIR).values));
    });

    test(`${name}: merger and deepstack features match the vision tower's`, () => {
      torch.noGrad(() =>
        torch.tidy(() => {
          const pixels = ref(`${name}.pixel_values`, DIR);
          const { features, deepstack } = family.model.encodeImages(
            torch.tensor(Float32Array.from(pixels.values), pixels.shape, { dtype: "f32" }),
            rows(`${name}.image_grid_thw`),
          );
          expect(maxRelativeError(features.toFloat32Array(), ref(`${name}.image_features`, DIR).values)).toBeLessThan(1e-5);
          expect(deepstack.length).toBe(2);
          deepstack.forEach((level, j) => expect(maxRelativeError(level.toFloat32Array(), ref(`${name}.deepstack_features.${j}`, DIR).values)).toBeLessThan(1e-5));
        }),
      );
    });
  }

  for (const name of CASES) {
    test(`${name}: training-forward logits within 1e-4 of transformers'`, () => {
      const logits = trainingLogits(rows(`${name}.input_ids`), [caseImages(name)]);
      const error = maxRelativeError(logits, ref(`${name}.logits`, DIR).values);
      process.stdout.write(`qwen3_vl ${name}: logits relative error ${error.toExponential(2)}\n`);
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
    // Prefill steps of 16 tokens: every image's placeholders span several chunks, so each
    // chunk gets its slice of the deepstack residuals.
    const loaded = loadEngine(DIR, { device: "cpu", dtype: "f32", max_seq_len: 256, kv_cache_gib: 0.01, max_slots: 8, max_prefill_tokens: 16 });
    try {
      const model = loaded.model as Qwen3VLChatModel;
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

describe("Qwen3-VL engine sampling log-probs = training forward log-probs (CPU, f32)", () => {
  test("image and text prompts, batched, at temperature 1 and 0.7", async () => {
    const loaded = loadEngine(DIR, { device: "cpu", dtype: "f32", max_seq_len: 512, kv_cache_gib: 0.05, max_slots: 8 });
    try {
      const messages = [...IMAGE_CASES.map((name) => fixtureMessages(DIR, name)), textMessages("Describe a sunny day.")];
      // compareLogprobs draws again where a reply samples an image pad.
      const r = await compareLogprobs(loaded, messages, { temperature: 1, maxNewTokens: 8 });
      expect(r.results.reduce((n, g) => n + g.tokenIds.length, 0)).toBeGreaterThan(messages.length);
      r.results.forEach((g, b) => expect(r.recomputed[b]!.length).toBe(g.logprobs.length));
      expect(r.maxAbsDiff).toBeLessThan(1e-4);
      expect(r.gradNorm).toBeGreaterThan(0);
      const tempered = await compareLogprobs(loaded, [fixtureMessages(DIR, "two_images")], { temperature: 0.7, maxNewTokens: 6 });
      expect(tempered.maxAbsDiff).toBeLessThan(1e-4);
      process.stdout.write(`qwen3_vl log-prob |engine - training| max ${r.maxAbsDiff.toExponential(2)} (T=0.7: ${tempered.maxAbsDiff.toExponential(2)})\n`);
    } finally {
      await loaded.close();
    }
  }, 60_000);
});
