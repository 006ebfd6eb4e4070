/**
 * GLM-4V (GLM-4.1V / GLM-4.6V-Flash) parity on CUDA. Skipped without a CUDA build of the
 * shim and a GPU.
 *
 *   - the committed tiny fixture (test/fixtures/glm4v_tiny, references computed by
 *     transformers on the CPU), f32 on the GPU: logits within 1e-4 relative error on every
 *     case and the left-padded batch, 12 greedy tokens by full recompute and through the
 *     engine (CUDA-graph decode steps);
 *   - with VAGEN_GLM4V_FLASH_DIR pointing at a directory made by
 *     `make_fixture.py --config flash --device cuda` (GLM-4.6V-Flash's published shapes:
 *     40 decoder layers of hidden 4096, 32 query heads over 2 key/value heads of head_dim
 *     128, half of each head rotated in 3-axis mrope sections [8, 12, 12], an untied
 *     151552-row head; a 24-block vision tower of hidden 1536 with the 2 x 2 downsample and
 *     the merger to 4096; random perturbed weights saved as bf16 in 2 GB shards, about 19 GB;
 *     three short prompts, text only and one image each of 192 and 209 image tokens;
 *     transformers' logits of each prompt's last 16 positions and its 12 greedy tokens,
 *     computed on the GPU from the same bf16-representable weights in f32): the prompt ids
 *     and rope index equal, the merger's features, f32 logits within 1e-4 of transformers'
 *     on every case, greedy tokens equal by recompute and through the engine (CUDA graphs
 *     on), and bf16 within bf16 rounding (no further from transformers' bf16 logits than
 *     twice transformers' own bf16-vs-f32 gap). Driver: test/gpu/real-shapes.sh.
 *     VAGEN_GLM4V_FLASH_DEVICE=cpu runs these checks on the CPU instead (a dry run on a
 *     reduced directory: make_fixture.py --config flash --device cpu --text-layers 2
 *     --vision-depth 2).
 *
 * The figures are printed (lines starting "glm4v") for docs/models.md.
 */
import { describe, expect, test } from "bun:test";
import { join } from "node:path";
import type { Glm4vChatModel } from "../../src/models/glm4v/chat-model.ts";
import { processGlm4vImages } from "../../src/models/glm4v/image-processor.ts";
import * as torch from "../../src/torch/index.ts";
import type { Device } from "../../src/torch/index.ts";
import { maxRelativeError, ref } from "../models/fixture.ts";
import { batchError, buildPrompt, caseError, caseImages, caseNames, cudaAvailable, engineGreedy, fmt, greedyByRecompute, loadFamily, refCases, rows, seconds } from "./vl-parity.ts";

const hasCuda = cudaAvailable();
const TINY_DIR = join(import.meta.dir, "..", "fixtures", "glm4v_tiny");

describe.skipIf(!hasCuda)("GLM-4V tiny on CUDA", () => {
  const names = caseNames(TINY_DIR);

  test("f32 logits and greedy tokens (recompute) match transformers", () => {
    const family = loadFamily<Glm4vChatModel>(TINY_DIR, "cuda" as Device, "f32");
    try {
      const errors: Record<string, number> = {};
      for (const name of names) errors[name] = caseError(family, TINY_DIR, name, "logits");
      errors.batch_left = batchError(family, TINY_DIR);
      console.log("glm4v tiny CUDA f32 logits max relative error", fmt(errors));
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

const dirFlash = process.env.VAGEN_GLM4V_FLASH_DIR;
// "cpu": the real-shape checks on the CPU (a dry run on a reduced directory); off by default.
const deviceFlash = (process.env.VAGEN_GLM4V_FLASH_DEVICE ?? "cuda") as Device;
const runFlash = Boolean(dirFlash) && (String(deviceFlash) === "cpu" || hasCuda);

describe.skipIf(!runFlash)(`GLM-4.6V-Flash configuration on ${deviceFlash}`, () => {
  const names = () => caseNames(dirFlash!);
  const cases = () => refCases(dirFlash!);
  const onCuda = String(deviceFlash).startsWith("cuda");

  test("f32: prompt ids and rope index equal, merger features and logits within 1e-4 of transformers', greedy tokens equal by recompute", () => {
    const t0 = performance.now();
    const family = loadFamily<Glm4vChatModel>(dirFlash!, deviceFlash, "f32");
    console.log(`glm4v flash f32 load ${seconds(t0)} s`);
    try {
      const tokens: Record<string, number> = {};
      for (const name of names()) {
        const prompt = buildPrompt(family, dirFlash!, name);
        expect(prompt.tokenIds).toEqual(cases()[name]!.input_ids);
        tokens[name] = prompt.images.reduce((n, i) => n + i.length, 0);
        if (cases()[name]!.image_keys.length > 0) {
          expect(prompt.images.map((i) => i.grid)).toEqual(rows(`${name}.image_grid_thw`, dirFlash!));
          expect(family.promptPositions(prompt).flat()).toEqual(Array.from(ref(`${name}.position_ids`, dirFlash!).values));
        }
      }
      console.log("glm4v flash image tokens per case", JSON.stringify(tokens), "prompt lengths", JSON.stringify(Object.fromEntries(names().map((n) => [n, cases()[n]!.input_ids.length]))));
      const features: Record<string, number> = {};
      for (const name of names().filter((n) => cases()[n]!.image_keys.length > 0)) {
        const pixels = ref(`${name}.pixel_values`, dirFlash!);
        const processed = processGlm4vImages(caseImages(dirFlash!, name), family.imageOptions);
        expect([processed.numPatches, processed.patchDim]).toEqual(pixels.shape);
        let maxDiff = 0;
        for (let i = 0; i < pixels.values.length; i++) maxDiff = Math.max(maxDiff, Math.abs(processed.pixelValues[i]! - pixels.values[i]!));
        expect(maxDiff).toBeLessThan(1e-5);
        features[name] = torch.noGrad(() =>
          torch.tidy(() => {
            const f = family.model.encodeImages(torch.tensor(Float32Array.from(pixels.values), pixels.shape, { dtype: "f32", device: deviceFlash }), rows(`${name}.image_grid_thw`, dirFlash!));
            return maxRelativeError(f.to("f32").toFloat32Array(), ref(`${name}.image_features`, dirFlash!).values);
          }),
        );
      }
      console.log("glm4v flash f32 merger features max relative error", fmt(features));
      for (const e of Object.values(features)) expect(e).toBeLessThan(1e-4);
      const errors: Record<string, number> = {};
      for (const name of names()) errors[name] = caseError(family, dirFlash!, name, "logits");
      console.log("glm4v flash f32 logits (last 16 positions) max relative error", fmt(errors));
      for (const e of Object.values(errors)) expect(e).toBeLessThan(1e-4);
      const t1 = performance.now();
      for (const name of names()) expect(greedyByRecompute(family, dirFlash!, name, 12)).toEqual(cases()[name]!.greedy);
      const margins = Object.fromEntries(names().map((n) => [n, Number((cases()[n]!.greedy_min_margin ?? NaN).toPrecision(3))]));
      console.log(`glm4v flash f32 greedy by recompute: equal on ${names().length} cases (${seconds(t1)} s; transformers' smallest top-2 logit gaps ${JSON.stringify(margins)})`);
    } finally {
      family.dispose();
    }
  }, 600_000);

  test(`f32: the engine gives transformers' 12 greedy tokens, batched${onCuda ? " (CUDA graphs on)" : ""}`, async () => {
    const t0 = performance.now();
    const { tokens, graphsDisabled } = await engineGreedy(dirFlash!, names(), deviceFlash, 2, 512);
    tokens.forEach((t, i) => expect(t).toEqual(cases()[names()[i]!]!.greedy));
    if (onCuda) expect(graphsDisabled).toBeUndefined();
    console.log(`glm4v flash engine f32 greedy: equal on ${names().length} cases (CUDA graphs ${graphsDisabled === undefined && onCuda ? "on" : "off"}; ${seconds(t0)} s with load)`);
  }, 600_000);

  test("bf16: logits within bf16 rounding of transformers' bf16 logits", () => {
    const family = loadFamily<Glm4vChatModel>(dirFlash!, deviceFlash, "bf16");
    try {
      for (const name of names()) {
        const scale = maxRelativeError(ref(`${name}.logits_bf16`, dirFlash!).values, ref(`${name}.logits`, dirFlash!).values);
        const err = caseError(family, dirFlash!, name, "logits_bf16");
        const vsF32 = caseError(family, dirFlash!, name, "logits");
        console.log(`glm4v flash bf16 ${name}: ${err.toExponential(2)} from transformers' bf16, ${vsF32.toExponential(2)} from its f32 (transformers' own bf16 gap ${scale.toExponential(2)})`);
        expect(err).toBeLessThan(2 * scale);
      }
    } finally {
      family.dispose();
    }
  }, 600_000);
});
