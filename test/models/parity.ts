/**
 * Running reference cases (from make_fixture.py) through vagen's Qwen2.5-VL: shared by the
 * CPU tests on the tiny fixture and the GPU tests on the tiny and 3B models.
 */
import * as torch from "../../src/torch/index.ts";
import type { Device, Tensor } from "../../src/torch/index.ts";
import type { Qwen25VLModel } from "../../src/models/qwen2_5_vl/model.ts";
import { FIXTURE_DIR, maxRelativeError, ref, refsJson } from "./fixture.ts";

export const SINGLE_CASES = ["text", "one_image", "two_images"] as const;
export const BATCH_CASES = ["batch_left", "batch_right"] as const;

export function refTensor(name: string, dir = FIXTURE_DIR, device: Device = "cpu"): Tensor {
  const r = ref(name, dir);
  return torch.tensor(Float32Array.from(r.values), r.shape, { dtype: "f32", device });
}

export function refRows(name: string, dir = FIXTURE_DIR): number[][] {
  const r = ref(name, dir);
  const [B, T] = [r.shape[0]!, r.shape[1]!];
  return Array.from({ length: B }, (_, b) => Array.from(r.values.subarray(b * T, (b + 1) * T)));
}

export function refGrids(name: string, dir = FIXTURE_DIR): number[][] {
  const r = ref(name, dir);
  return Array.from({ length: r.shape[0]! }, (_, i) => Array.from(r.values.subarray(i * 3, i * 3 + 3)));
}

export function caseHasImages(name: string, dir = FIXTURE_DIR): boolean {
  return (refsJson(dir).cases[name]?.image_keys?.length ?? 0) > 0 || name.startsWith("batch");
}

/** Logits (float64, flattened B*T*V) of a reference case, without gradients. */
export function caseLogits(model: Qwen25VLModel, name: string, dir = FIXTURE_DIR): Float64Array {
  const isBatch = name.startsWith("batch");
  const images = caseHasImages(name, dir);
  return torch.noGrad(() =>
    torch.tidy(() => {
      const out = model.forwardBatch({
        inputIds: refRows(`${name}.input_ids`, dir),
        attentionMask: isBatch ? refRows(`${name}.attention_mask`, dir) : undefined,
        pixelValues: images ? refTensor(`${name}.pixel_values`, dir, model.device) : undefined,
        imageGridThw: images ? refGrids(`${name}.image_grid_thw`, dir) : [],
      });
      return Float64Array.from(model.logits(out.hidden).to("f32").toArray() as Float32Array);
    }),
  );
}

/**
 * max |vagen - transformers| / max |transformers| over the real (unpadded) tokens of a
 * case; `key` picks the reference (`logits` or `logits_bf16`).
 */
export function caseError(model: Qwen25VLModel, name: string, dir = FIXTURE_DIR, key = "logits"): number {
  const actual = caseLogits(model, name, dir);
  const expected = ref(`${name}.${key}`, dir);
  if (actual.length !== expected.values.length) throw new Error(`${name}: ${actual.length} logits, reference has ${expected.values.length}`);
  if (!name.startsWith("batch")) return maxRelativeError(actual, expected.values);
  const mask = refRows(`${name}.attention_mask`, dir);
  const [B, T, V] = expected.shape as [number, number, number];
  const a: number[] = [];
  const e: number[] = [];
  for (let b = 0; b < B; b++) {
    for (let t = 0; t < T; t++) {
      if (!mask[b]![t]) continue;
      const o = (b * T + t) * V;
      for (let v = 0; v < V; v++) {
        a.push(actual[o + v]!);
        e.push(expected.values[o + v]!);
      }
    }
  }
  if (!a.every(Number.isFinite)) return Number.POSITIVE_INFINITY;
  return maxRelativeError(a, e);
}

/**
 * How far transformers' own bf16 logits are from its f32 logits: the size of "bf16
 * rounding" for this model and prompt. vagen's bf16 logits count as within bf16 rounding
 * when their distance to transformers' bf16 logits is of the same size.
 */
export function bf16RoundingScale(name: string, dir = FIXTURE_DIR): number {
  return maxRelativeError(ref(`${name}.logits_bf16`, dir).values, ref(`${name}.logits`, dir).values);
}

/**
 * Greedy token ids from prompt ids + the reference pixel values, recomputing the whole
 * sequence each step (the engine's KV-cached decoding is checked against this elsewhere).
 */
export function greedyFromIds(model: Qwen25VLModel, name: string, steps: number, dir = FIXTURE_DIR): number[] {
  const ids = [...refRows(`${name}.input_ids`, dir)[0]!];
  const images = caseHasImages(name, dir);
  const out: number[] = [];
  torch.noGrad(() => {
    const pixels = images ? refTensor(`${name}.pixel_values`, dir, model.device) : undefined;
    try {
      for (let i = 0; i < steps; i++) {
        const token = torch.tidy(() => {
          const r = model.forwardBatch({ inputIds: [ids], pixelValues: pixels, imageGridThw: images ? refGrids(`${name}.image_grid_thw`, dir) : [] });
          return model.logits(r.hidden.narrow(1, ids.length - 1, 1)).argmax(-1).item();
        });
        out.push(token);
        ids.push(token);
      }
    } finally {
      pixels?.dispose();
    }
  });
  return out;
}
