/**
 * Qwen3 (text) parity on CUDA, on the committed tiny fixture (head_dim 64, so the engine's
 * fused decode-attention kernel applies; q/k RMSNorm before it). Skipped without a CUDA
 * build of the shim and a GPU.
 *
 *   - f32 on the GPU against transformers (computed on the CPU): logits within 1e-4
 *     relative error on every case and padded batch, 12 greedy tokens by full recompute;
 *   - the engine in f32 (prefill, CUDA-graph decode steps with the fused kernels): the
 *     same 12 greedy tokens for every case, batched;
 *   - bf16 logits within bf16 rounding (no further from transformers' bf16 than twice
 *     transformers' own bf16-vs-f32 gap);
 *   - with VAGEN_QWEN3_0_6B_DIR pointing at a directory made by
 *     `make_fixture.py --config 0.6b --device cuda` (the published Qwen3-0.6B shapes with
 *     random perturbed weights, saved in shards, and transformers' logits of each prompt's
 *     last 16 positions and 12 greedy tokens): f32 logits within 1e-4, greedy tokens equal
 *     by recompute and through the engine (head_dim 128: the fused decode kernel), and
 *     bf16 within bf16 rounding.
 */
import { describe, expect, test } from "bun:test";
import { refsJson } from "../models/fixture.ts";
import { loadEngine } from "../../src/engine/load.ts";
import { Qwen3Model } from "../../src/models/qwen3/model.ts";
import * as torch from "../../src/torch/index.ts";
import { maxRelativeError, ref } from "../models/fixture.ts";
import { QWEN3_BATCHES, QWEN3_CASES, QWEN3_DIR, caseError, greedyFromIds, qwen3Refs } from "../models/qwen3-parity.ts";

function cudaAvailable(): boolean {
  try {
    return torch.torchInfo().cudaDevices > 0;
  } catch {
    return false;
  }
}

describe.skipIf(!cudaAvailable())("Qwen3 tiny on CUDA", () => {
  test("f32 logits and greedy tokens match transformers", () => {
    const model = Qwen3Model.load(QWEN3_DIR, { device: "cuda", dtype: "f32" });
    try {
      const errors: Record<string, number> = {};
      for (const name of [...QWEN3_CASES, ...QWEN3_BATCHES]) errors[name] = caseError(model, name);
      console.log("qwen3 tiny CUDA f32 max relative error", JSON.stringify(errors));
      for (const e of Object.values(errors)) expect(e).toBeLessThan(1e-4);
      for (const name of QWEN3_CASES) expect(greedyFromIds(model, qwen3Refs.cases[name]!.input_ids!, 12)).toEqual(qwen3Refs.cases[name]!.greedy!);
    } finally {
      model.dispose();
    }
  }, 120_000);

  test("the engine's CUDA-graph decode gives transformers' 12 greedy tokens, batched (f32)", async () => {
    const loaded = loadEngine(QWEN3_DIR, { device: "cuda", dtype: "f32", max_seq_len: 256, kv_cache_gib: 0.05, max_slots: 8 });
    try {
      const results = await Promise.all(
        QWEN3_CASES.map((name) =>
          loaded.engine.generate({ prompt: { tokenIds: [...qwen3Refs.cases[name]!.input_ids!], images: [] }, sampling: { temperature: 0, maxNewTokens: 12, ignoreStopTokens: true } }),
        ),
      );
      results.forEach((r, i) => expect(r.tokenIds).toEqual(qwen3Refs.cases[QWEN3_CASES[i]!]!.greedy!));
      expect(loaded.runner.graphsDisabled).toBeUndefined();
    } finally {
      await loaded.close();
    }
  }, 120_000);

  test("bf16 logits are within bf16 rounding of transformers' bf16 logits", () => {
    const model = Qwen3Model.load(QWEN3_DIR, { device: "cuda", dtype: "bf16" });
    try {
      for (const name of ["single", "multi_turn"]) {
        const scale = maxRelativeError(ref(`${name}.logits_bf16`, QWEN3_DIR).values, ref(`${name}.logits`, QWEN3_DIR).values);
        const err = caseError(model, name, "logits_bf16");
        console.log(`qwen3 tiny CUDA bf16 ${name}: ${err.toExponential(2)} (transformers' own bf16 gap ${scale.toExponential(2)})`);
        expect(err).toBeLessThan(2 * scale);
        expect(caseError(model, name, "logits")).toBeLessThan(2 * scale);
      }
    } finally {
      model.dispose();
    }
  }, 120_000);
});

const dir06b = process.env.VAGEN_QWEN3_0_6B_DIR;

/** max relative error of vagen's logits at a case's last positions against the reference's. */
function lastPositionsError(model: Qwen3Model, dir: string, name: string, key: string): number {
  const expected = ref(`${name}.${key}`, dir);
  const [, P, V] = expected.shape as [number, number, number];
  const ids = Array.from(ref(`${name}.input_ids`, dir).values);
  const actual = torch.noGrad(() =>
    torch.tidy(() => {
      const hidden = model.forwardBatch({ inputIds: [ids] });
      return Float64Array.from(model.logits(hidden.narrow(1, ids.length - P, P)).to("f32").toFloat32Array());
    }),
  );
  expect(actual.length).toBe(P * V);
  return maxRelativeError(actual, expected.values);
}

describe.skipIf(!cudaAvailable() || !dir06b)("Qwen3-0.6B configuration on CUDA", () => {
  const cases = () => refsJson(dir06b!).cases as Record<string, { input_ids: number[]; greedy: number[] }>;

  test("f32: logits within 1e-4 relative error, greedy tokens equal (recompute and engine)", async () => {
    const model = Qwen3Model.load(dir06b!, { device: "cuda", dtype: "f32" });
    try {
      const errors: Record<string, number> = {};
      for (const name of QWEN3_CASES) errors[name] = lastPositionsError(model, dir06b!, name, "logits");
      console.log("qwen3 0.6B CUDA f32 max relative error", JSON.stringify(errors));
      for (const e of Object.values(errors)) expect(e).toBeLessThan(1e-4);
      for (const name of QWEN3_CASES) expect(greedyFromIds(model, cases()[name]!.input_ids, 12)).toEqual(cases()[name]!.greedy);
    } finally {
      model.dispose();
    }
    const loaded = loadEngine(dir06b!, { device: "cuda", dtype: "f32", max_seq_len: 256, kv_cache_gib: 1, max_slots: 8 });
    try {
      const results = await Promise.all(
        QWEN3_CASES.map((name) => loaded.engine.generate({ prompt: { tokenIds: [...cases()[name]!.input_ids], images: [] }, sampling: { temperature: 0, maxNewTokens: 12, ignoreStopTokens: true } })),
      );
      results.forEach((r, i) => expect(r.tokenIds).toEqual(cases()[QWEN3_CASES[i]!]!.greedy));
      expect(loaded.runner.graphsDisabled).toBeUndefined();
    } finally {
      await loaded.close();
    }
  }, 600_000);

  test("bf16: logits within bf16 rounding of transformers' bf16 logits", () => {
    const model = Qwen3Model.load(dir06b!, { device: "cuda", dtype: "bf16" });
    try {
      for (const name of ["single", "multi_turn"]) {
        const scale = maxRelativeError(ref(`${name}.logits_bf16`, dir06b!).values, ref(`${name}.logits`, dir06b!).values);
        const err = lastPositionsError(model, dir06b!, name, "logits_bf16");
        console.log(`qwen3 0.6B CUDA bf16 ${name}: ${err.toExponential(2)} (transformers' own bf16 gap ${scale.toExponential(2)})`);
        expect(err).toBeLessThan(2 * scale);
      }
    } finally {
      model.dispose();
    }
  }, 600_000);
});
