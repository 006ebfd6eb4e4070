/**
 * Qwen2.5-VL parity on CUDA. Skipped without a CUDA build of the shim and a GPU.
 *
 *   - the committed tiny fixture, f32 on the GPU, against transformers (computed on CPU);
 *   - with VAGEN_QWEN25VL_3B_DIR pointing at a directory made by
 *     `make_fixture.py --config 3b --device cuda` (the published 3B configuration with
 *     random weights, and transformers' reference logits and greedy tokens): f32 logits
 *     within 1e-4 relative error, greedy tokens equal, bf16 logits within bf16 rounding
 *     (no further from transformers' bf16 than twice transformers' own bf16-vs-f32 gap).
 */
import { describe, expect, test } from "bun:test";
import * as torch from "../../src/torch/index.ts";
import { Qwen25VLModel } from "../../src/models/qwen2_5_vl/model.ts";
import { FIXTURE_DIR, refsJson } from "../models/fixture.ts";
import { BATCH_CASES, SINGLE_CASES, bf16RoundingScale, caseError, greedyFromIds } from "../models/parity.ts";

function cudaAvailable(): boolean {
  try {
    return torch.torchInfo().cudaDevices > 0;
  } catch {
    return false;
  }
}

const hasCuda = cudaAvailable();
const dir3b = process.env.VAGEN_QWEN25VL_3B_DIR;

describe.skipIf(!hasCuda)("Qwen2.5-VL tiny on CUDA", () => {
  test("f32 logits and greedy tokens match transformers", () => {
    const model = Qwen25VLModel.load(FIXTURE_DIR, { device: "cuda", dtype: "f32" });
    try {
      for (const name of [...SINGLE_CASES, ...BATCH_CASES]) expect(caseError(model, name)).toBeLessThan(1e-4);
      for (const name of SINGLE_CASES) {
        const expected = refsJson().cases[name]!.greedy!;
        expect(greedyFromIds(model, name, expected.length)).toEqual(expected);
      }
    } finally {
      model.dispose();
    }
  });
});

describe.skipIf(!hasCuda || !dir3b)("Qwen2.5-VL 3B configuration on CUDA", () => {
  test("f32: logits within 1e-4 relative error and greedy tokens equal", () => {
    const model = Qwen25VLModel.load(dir3b!, { device: "cuda", dtype: "f32" });
    try {
      const errors: Record<string, number> = {};
      for (const name of [...SINGLE_CASES, ...BATCH_CASES]) errors[name] = caseError(model, name, dir3b!);
      console.log("3B f32 max relative error", JSON.stringify(errors));
      for (const e of Object.values(errors)) expect(e).toBeLessThan(1e-4);
      for (const name of SINGLE_CASES) {
        const expected = refsJson(dir3b!).cases[name]!.greedy!;
        expect(greedyFromIds(model, name, expected.length, dir3b!)).toEqual(expected);
      }
    } finally {
      model.dispose();
    }
  }, 600_000);

  test("bf16: logits within bf16 rounding of transformers' bf16 logits", () => {
    const model = Qwen25VLModel.load(dir3b!, { device: "cuda", dtype: "bf16" });
    try {
      const report: Record<string, Record<string, number>> = {};
      for (const name of SINGLE_CASES) {
        report[name] = {
          vagen_vs_transformers_bf16: caseError(model, name, dir3b!, "logits_bf16"),
          vagen_bf16_vs_transformers_f32: caseError(model, name, dir3b!, "logits"),
          transformers_bf16_vs_f32: bf16RoundingScale(name, dir3b!),
        };
      }
      console.log("3B bf16 max relative errors", JSON.stringify(report));
      // transformers' bf16 is itself this far from its f32; we must be no further than twice that.
      for (const r of Object.values(report)) {
        expect(r.vagen_vs_transformers_bf16!).toBeLessThan(2 * r.transformers_bf16_vs_f32!);
        expect(r.vagen_bf16_vs_transformers_f32!).toBeLessThan(2 * r.transformers_bf16_vs_f32!);
      }
    } finally {
      model.dispose();
    }
  }, 600_000);
});
