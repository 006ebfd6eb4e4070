/**
 * Running the Qwen3 fixture's reference cases (test/fixtures/qwen3_tiny, made by its
 * make_fixture.py with transformers) through vagen's Qwen3: shared by the CPU tests and the
 * CUDA test (test/gpu/qwen3.test.ts).
 */
import { join } from "node:path";
import type { Qwen3Model } from "../../src/models/qwen3/model.ts";
import * as torch from "../../src/torch/index.ts";
import { maxRelativeError, ref, refsJson, type RefCase } from "./fixture.ts";

export const QWEN3_DIR = join(import.meta.dir, "..", "fixtures", "qwen3_tiny");
export const QWEN3_CASES = ["single", "system", "multi_turn", "no_think", "multi_turn_no_think"] as const;
export const QWEN3_BATCHES = ["batch_left", "batch_right"] as const;

export type Qwen3Case = RefCase & { template_kwargs: Record<string, unknown> };
export const qwen3Refs = refsJson(QWEN3_DIR) as unknown as { cases: Record<string, Qwen3Case>; tokenizer_checks: { text: string; ids: number[] }[] };

export function rows(name: string): number[][] {
  const r = ref(name, QWEN3_DIR);
  const [B, T] = [r.shape[0]!, r.shape[1]!];
  return Array.from({ length: B }, (_, b) => Array.from(r.values.subarray(b * T, (b + 1) * T)));
}

/** Logits (float64, flattened B*T*V) of a padded batch, no gradients. */
export function logitsOf(model: Qwen3Model, inputIds: number[][], attentionMask?: number[][]): Float64Array {
  return torch.noGrad(() => torch.tidy(() => Float64Array.from(model.logits(model.forwardBatch({ inputIds, attentionMask })).to("f32").toFloat32Array())));
}

/** max |vagen - transformers| / max |transformers| over the real tokens of a case. */
export function caseError(model: Qwen3Model, name: string, key = "logits"): number {
  const isBatch = name.startsWith("batch");
  const mask = isBatch ? rows(`${name}.attention_mask`) : undefined;
  const actual = logitsOf(model, rows(`${name}.input_ids`), mask);
  const expected = ref(`${name}.${key}`, QWEN3_DIR);
  if (actual.length !== expected.values.length) throw new Error(`${name}: ${actual.length} logits, reference has ${expected.values.length}`);
  if (!mask) return maxRelativeError(actual, expected.values);
  const [B, T, V] = expected.shape as [number, number, number];
  const a: number[] = [];
  const e: number[] = [];
  for (let b = 0; b < B; b++) {
    for (let t = 0; t < T; t++) {
      if (!mask[b]![t]) continue;
      for (let v = 0; v < V; v++) {
        a.push(actual[(b * T + t) * V + v]!);
        e.push(expected.values[(b * T + t) * V + v]!);
      }
    }
  }
  return maxRelativeError(a, e);
}

/** Greedy ids by recomputing the whole sequence each step (the engine is checked against this too). */
export function greedyFromIds(model: Qwen3Model, ids: readonly number[], steps: number): number[] {
  const seq = [...ids];
  const out: number[] = [];
  torch.noGrad(() => {
    for (let i = 0; i < steps; i++) {
      const token = torch.tidy(() => model.logits(model.forwardBatch({ inputIds: [seq] }).narrow(1, seq.length - 1, 1)).argmax(-1).item());
      out.push(token);
      seq.push(token);
    }
  });
  return out;
}

