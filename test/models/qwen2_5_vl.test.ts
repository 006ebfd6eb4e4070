/**
 * Parity of vagen's Qwen2.5-VL with transformers on the committed tiny model (CPU, f32):
 * vision features, logits for text / one-image / two-image prompts, padded batches (left
 * and right), bf16 within bf16 rounding, greedy generations token for token; plus the
 * value head, gradients, count checks and tensor lifetimes.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import * as torch from "../../src/torch/index.ts";
import { F } from "../../src/torch/index.ts";
import { rotated, type AttentionBackend } from "../../src/models/attention.ts";
import { Qwen25VLModel } from "../../src/models/qwen2_5_vl/model.ts";
import { FIXTURE_DIR, maxRelativeError, ref, refsJson } from "./fixture.ts";
import { BATCH_CASES, SINGLE_CASES, bf16RoundingScale, caseError, greedyFromIds, refGrids as grids, refRows, refTensor } from "./parity.ts";

const refs = refsJson();
let model: Qwen25VLModel;
let ledger: { leaked(): number };

beforeAll(() => {
  torch.loadTorch();
  ledger = torch.tensorLedger();
  model = Qwen25VLModel.load(FIXTURE_DIR, { device: "cpu", dtype: "f32" });
});

afterAll(() => {
  model.dispose();
  expect(ledger.leaked()).toBe(0);
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

  test("images encoded together equal each encoded alone, same sizes (segments batched) and mixed (masked)", () => {
    torch.noGrad(() =>
      torch.tidy(() => {
        const patchDim = 3 * 2 * 14 * 14;
        // 8x8 patches: one window each; 12x16: windows of unequal sizes (4x4 and 2x4 merged blocks).
        for (const grid of [[[1, 8, 8], [1, 8, 8], [1, 8, 8]], [[1, 8, 8], [1, 12, 16], [1, 4, 4]], [[1, 12, 16], [1, 12, 16]]]) {
          torch.manualSeed(grid.length);
          const pixels = grid.map(([t, h, w]) => torch.randn([t! * h! * w!, patchDim]));
          const together = model.encodeImages(torch.cat(pixels, 0), grid);
          const alone = torch.cat(pixels.map((p, i) => model.encodeImages(p, [grid[i]!])), 0);
          expect(together.shape).toEqual(alone.shape);
          expect(together.sub(alone).abs().max().item()).toBeLessThan(1e-5 * Math.max(1, alone.abs().max().item()));
        }
      }),
    );
  });

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
  }, 30_000); // a full recompute per token
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
  test("an attention backend replaces the built-in causal attention, layer by layer", () => {
    const ids = refRows("text.input_ids");
    const layers: number[] = [];
    const backend: AttentionBackend = {
      attend(layer, input) {
        layers.push(layer);
        const { q, k, v } = rotated(input);
        return F.scaledDotProductAttention(q, k, v, { isCausal: true, enableGqa: true });
      },
    };
    const [plain, hooked] = torch.noGrad(() =>
      torch.tidy(() => {
        const embeds = model.embed(ids);
        const { positionIds } = model.positionIds(ids, undefined, []);
        return [model.forward({ inputsEmbeds: embeds, positionIds }).toArray() as Float32Array, model.forward({ inputsEmbeds: embeds, positionIds, attention: backend }).toArray() as Float32Array];
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

