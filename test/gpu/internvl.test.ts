/**
 * InternVL3.5 parity on CUDA. Skipped without a CUDA build of the shim and a GPU.
 *
 *   - the committed tiny fixture (test/fixtures/internvl_tiny, references computed by
 *     transformers on the CPU), f32 on the GPU: logits within 1e-4 relative error on every
 *     case and the left-padded batch, 12 greedy tokens by full recompute and through the
 *     engine (CUDA-graph decode steps);
 *   - with VAGEN_INTERNVL_1B_DIR pointing at a directory made by
 *     `make_fixture.py --config 1b --device cuda` (InternVL3.5-1B's published shapes:
 *     InternViT-300M, 24 layers of hidden 1024 over 448-pixel tiles, 256 tokens a tile; the
 *     Qwen3-0.6B decoder, 28 layers of head_dim 128, a tied 151936-row embedding; random
 *     perturbed weights saved as bf16 in 1 GB shards; images of 1 to 3 tiles, 256 to 768
 *     image tokens a prompt; transformers' logits of each prompt's last 16 positions and its
 *     12 greedy tokens, computed on the GPU from the same weights in f32): the prompt ids and
 *     tile counts equal, the tiles' pixels and the projected image features transformers',
 *     f32 logits within 1e-4 of transformers' on every case, greedy tokens equal by
 *     recompute and through the engine (CUDA graphs on, the fused decode kernel), and bf16
 *     within bf16 rounding (no further from transformers' bf16 logits than twice
 *     transformers' own bf16-vs-f32 gap). Driver: test/gpu/real-shapes.sh.
 *     VAGEN_INTERNVL_1B_DEVICE=cpu runs these checks on the CPU instead (a dry run on a
 *     reduced directory: make_fixture.py --config 1b --device cpu --text-layers 2
 *     --vision-depth 2).
 *
 * The figures are printed (lines starting "internvl") for docs/models.md.
 */
import { describe, expect, test } from "bun:test";
import { join } from "node:path";
import type { InternVLChatModel } from "../../src/models/internvl/chat-model.ts";
import { tileImages } from "../../src/models/internvl/tiling.ts";
import * as torch from "../../src/torch/index.ts";
import type { Device } from "../../src/torch/index.ts";
import { maxRelativeError, ref } from "../models/fixture.ts";
import { batchError, buildPrompt, caseError, caseImages, caseNames, cudaAvailable, engineGreedy, fmt, greedyByRecompute, loadFamily, refCases, seconds } from "./vl-parity.ts";

const hasCuda = cudaAvailable();
const TINY_DIR = join(import.meta.dir, "..", "fixtures", "internvl_tiny");

describe.skipIf(!hasCuda)("InternVL tiny on CUDA", () => {
  const names = caseNames(TINY_DIR);

  test("f32 logits and greedy tokens (recompute) match transformers", () => {
    const family = loadFamily<InternVLChatModel>(TINY_DIR, "cuda" as Device, "f32");
    try {
      const errors: Record<string, number> = {};
      for (const name of names) errors[name] = caseError(family, TINY_DIR, name, "logits");
      errors.batch_left = batchError(family, TINY_DIR);
      console.log("internvl tiny CUDA f32 logits max relative error", fmt(errors));
      for (const e of Object.values(errors)) expect(e).toBeLessThan(1e-4);
      for (const name of names) expect(greedyByRecompute(family, TINY_DIR, name, 12)).toEqual(refCases(TINY_DIR)[name]!.greedy);
    } finally {
      family.dispose();
    }
  }, 120_000);

  test("the engine's CUDA-graph decode gives transformers' 12 greedy tokens, batched (f32)", async () => {
    const { tokens, graphsDisabled } = await engineGreedy(TINY_DIR, names, "cuda" as Device, 0.05, 512);
    tokens.forEach((t, i) => expect(t).toEqual(refCases(TINY_DIR)[names[i]!]!.greedy));
    expect(graphsDisabled).toBeUndefined();
  }, 120_000);
});

const dir1b = process.env.VAGEN_INTERNVL_1B_DIR;
// "cpu": the real-shape checks on the CPU (a dry run on a reduced directory); off by default.
const device1b = (process.env.VAGEN_INTERNVL_1B_DEVICE ?? "cuda") as Device;
const run1b = Boolean(dir1b) && (String(device1b) === "cpu" || hasCuda);

describe.skipIf(!run1b)(`InternVL3.5-1B configuration on ${device1b}`, () => {
  const names = () => caseNames(dir1b!);
  const cases = () => refCases(dir1b!);
  const onCuda = String(device1b).startsWith("cuda");

  test("f32: prompt ids and tiles equal, image features and logits within 1e-4 of transformers', greedy tokens equal by recompute", () => {
    const t0 = performance.now();
    const family = loadFamily<InternVLChatModel>(dir1b!, device1b, "f32");
    console.log(`internvl 1B f32 load ${seconds(t0)} s`);
    try {
      const tokens: Record<string, number> = {};
      for (const name of names()) {
        const prompt = buildPrompt(family, dir1b!, name);
        expect(prompt.tokenIds).toEqual(cases()[name]!.input_ids);
        expect(prompt.images.map((i) => i.length / family.model.config.tokensPerTile)).toEqual(cases()[name]!.num_patches ?? []);
        tokens[name] = prompt.images.reduce((n, i) => n + i.length, 0);
      }
      console.log("internvl 1B image tokens per case", JSON.stringify(tokens), "prompt lengths", JSON.stringify(Object.fromEntries(names().map((n) => [n, cases()[n]!.input_ids.length]))));
      const features: Record<string, number> = {};
      for (const name of names().filter((n) => cases()[n]!.image_keys.length > 0)) {
        const expected = ref(`${name}.pixel_values`, dir1b!);
        const tiled = tileImages(caseImages(dir1b!, name), family.tiling);
        expect([tiled.numTiles, 3, family.tiling.tileSize, family.tiling.tileSize]).toEqual(expected.shape);
        let maxDiff = 0;
        for (let i = 0; i < expected.values.length; i++) maxDiff = Math.max(maxDiff, Math.abs(tiled.pixelValues[i]! - expected.values[i]!));
        expect(maxDiff).toBeLessThan(1e-5);
        features[name] = torch.noGrad(() =>
          torch.tidy(() => {
            const f = family.model.encodeTiles(torch.tensor(Float32Array.from(expected.values), expected.shape, { dtype: "f32", device: device1b }));
            return maxRelativeError(f.to("f32").toFloat32Array(), ref(`${name}.image_features`, dir1b!).values);
          }),
        );
      }
      console.log("internvl 1B f32 projected image features max relative error", fmt(features));
      for (const e of Object.values(features)) expect(e).toBeLessThan(1e-4);
      const errors: Record<string, number> = {};
      for (const name of names()) errors[name] = caseError(family, dir1b!, name, "logits");
      console.log("internvl 1B f32 logits (last 16 positions) max relative error", fmt(errors));
      for (const e of Object.values(errors)) expect(e).toBeLessThan(1e-4);
      const t1 = performance.now();
      for (const name of names()) expect(greedyByRecompute(family, dir1b!, name, 12)).toEqual(cases()[name]!.greedy);
      const margins = Object.fromEntries(names().map((n) => [n, Number((cases()[n]!.greedy_min_margin ?? NaN).toPrecision(3))]));
      console.log(`internvl 1B f32 greedy by recompute: equal on ${names().length} cases (${seconds(t1)} s; transformers' smallest top-2 logit gaps ${JSON.stringify(margins)})`);
    } finally {
      family.dispose();
    }
  }, 600_000);

  test(`f32: the engine gives transformers' 12 greedy tokens, batched${onCuda ? " (CUDA graphs on)" : ""}`, async () => {
    const t0 = performance.now();
    const { tokens, graphsDisabled } = await engineGreedy(dir1b!, names(), device1b, 2, 1024);
    tokens.forEach((t, i) => expect(t).toEqual(cases()[names()[i]!]!.greedy));
    if (onCuda) expect(graphsDisabled).toBeUndefined();
    console.log(`internvl 1B engine f32 greedy: equal on ${names().length} cases (CUDA graphs ${graphsDisabled === undefined && onCuda ? "on" : "off"}; ${seconds(t0)} s with load)`);
  }, 600_000);

  test("bf16: logits within bf16 rounding of transformers' bf16 logits", () => {
    const family = loadFamily<InternVLChatModel>(dir1b!, device1b, "bf16");
    try {
      for (const name of names()) {
        const scale = maxRelativeError(ref(`${name}.logits_bf16`, dir1b!).values, ref(`${name}.logits`, dir1b!).values);
        const err = caseError(family, dir1b!, name, "logits_bf16");
        const vsF32 = caseError(family, dir1b!, name, "logits");
        console.log(`internvl 1B bf16 ${name}: ${err.toExponential(2)} from transformers' bf16, ${vsF32.toExponential(2)} from its f32 (transformers' own bf16 gap ${scale.toExponential(2)})`);
        expect(err).toBeLessThan(2 * scale);
      }
    } finally {
      family.dispose();
    }
  }, 600_000);
});
