/**
 * Shared steps of the vision-language GPU parity tests (test/gpu/internvl.test.ts,
 * test/gpu/glm4v.test.ts) on a reference directory made by a family's make_fixture.py:
 * the committed tiny fixture (logits at every position, a left-padded batch) or a
 * real-shape one (`--config 1b` / `--config flash`: logits of each prompt's last 16
 * positions only). Every check goes through the family's seam (ModelFamily) as the
 * engine and the trainer do.
 */
import { expect } from "bun:test";
import type { RGBImage } from "../../src/core/image.ts";
import { loadEngine } from "../../src/engine/load.ts";
import type { ModelFamily } from "../../src/models/family.ts";
import { loadModelFamily } from "../../src/models/index.ts";
import type { Prompt } from "../../src/models/prompt.ts";
import * as torch from "../../src/torch/index.ts";
import type { Device } from "../../src/torch/index.ts";
import { fixtureMessages, maxRelativeError, ref, refsJson } from "../models/fixture.ts";

export function cudaAvailable(): boolean {
  try {
    return torch.torchInfo().cudaDevices > 0;
  } catch {
    return false;
  }
}

export interface VLCase {
  input_ids: number[];
  greedy: number[];
  image_keys: string[];
  num_patches?: number[];
  bf16_gap?: number;
  greedy_min_margin?: number;
  image_tokens?: number;
}

export function refCases(dir: string): Record<string, VLCase> {
  return refsJson(dir).cases as unknown as Record<string, VLCase>;
}

/** The reference's per-prompt cases (not the padded batch), in refs.json's order. */
export function caseNames(dir: string): string[] {
  return Object.keys(refCases(dir)).filter((n) => !n.startsWith("batch_"));
}

/** The case's images, in placeholder order. */
export function caseImages(dir: string, name: string): RGBImage[] {
  return fixtureMessages(dir, name).flatMap((m) => m.content.flatMap((p) => (p.type === "image" ? [p.image] : [])));
}

export function rows(name: string, dir: string): number[][] {
  const r = ref(name, dir);
  const [B, T] = [r.shape[0]!, r.shape[1]!];
  return Array.from({ length: B }, (_, b) => Array.from(r.values.subarray(b * T, (b + 1) * T)));
}

export function loadFamily<F extends ModelFamily>(dir: string, device: Device, dtype: "f32" | "bf16"): F {
  return loadModelFamily(dir, { device, dtype }) as F;
}

export function buildPrompt(family: ModelFamily, dir: string, name: string): Prompt {
  return family.buildPrompt(fixtureMessages(dir, name));
}

/**
 * max relative error of the training forward's logits at a case's last positions (as many
 * as the reference holds: all of them for a tiny fixture, 16 at real shapes) against the
 * reference's `key` tensor.
 */
export function caseError(family: ModelFamily, dir: string, name: string, key: string): number {
  const expected = ref(`${name}.${key}`, dir);
  const [, P, V] = expected.shape as [number, number, number];
  const ids = refCases(dir)[name]!.input_ids;
  const actual = torch.noGrad(() =>
    torch.tidy(() => {
      const hidden = family.forwardForTraining({ inputIds: [ids], images: [caseImages(dir, name)] });
      return Float64Array.from(family.logits(hidden.narrow(1, ids.length - P, P)).to("f32").toFloat32Array());
    }),
  );
  expect(actual.length).toBe(P * V);
  return maxRelativeError(actual, expected.values);
}

/** A tiny fixture's left-padded batch (batch_left): logits at every real token. */
export function batchError(family: ModelFamily, dir: string): number {
  const mask = rows("batch_left.attention_mask", dir);
  const batchRows = (refsJson(dir).cases.batch_left as unknown as { rows: string[] }).rows;
  const images = batchRows.map((n) => caseImages(dir, n));
  const actual = torch.noGrad(() =>
    torch.tidy(() =>
      Float64Array.from(family.logits(family.forwardForTraining({ inputIds: rows("batch_left.input_ids", dir), attentionMask: mask, images })).to("f32").toFloat32Array()),
    ),
  );
  const expected = ref("batch_left.logits", dir);
  const [B, T, V] = expected.shape as [number, number, number];
  const a: number[] = [];
  const e: number[] = [];
  for (let b = 0; b < B; b++) {
    for (let t = 0; t < T; t++) {
      if (!mask[b]![t]) continue;
      for (let v = 0; v < V; v++) a.push(actual[(b * T + t) * V + v]!), e.push(expected.values[(b * T + t) * V + v]!);
    }
  }
  return maxRelativeError(a, e);
}

/** Greedy ids by recomputing the whole sequence (images included) each step. */
export function greedyByRecompute(family: ModelFamily, dir: string, name: string, steps: number): number[] {
  const seq = [...refCases(dir)[name]!.input_ids];
  const images = caseImages(dir, name);
  const out: number[] = [];
  torch.noGrad(() => {
    for (let i = 0; i < steps; i++) {
      const token = torch.tidy(() => {
        const hidden = family.forwardForTraining({ inputIds: [seq], images: [images] });
        return family.logits(hidden.narrow(1, seq.length - 1, 1)).argmax(-1).item();
      });
      out.push(token);
      seq.push(token);
    }
  });
  return out;
}

/** 12 greedy tokens of every case through the engine (batched, from the chat messages). */
export async function engineGreedy(
  dir: string,
  names: readonly string[],
  device: Device,
  kvGib: number,
  maxSeqLen: number,
): Promise<{ tokens: number[][]; graphsDisabled: string | undefined }> {
  const loaded = loadEngine(dir, { device, dtype: "f32", max_seq_len: maxSeqLen, kv_cache_gib: kvGib, max_slots: 8 });
  try {
    const model = loaded.model;
    const results = await Promise.all(
      names.map((name) =>
        loaded.engine.generate({ prompt: model.buildPrompt(fixtureMessages(dir, name)), sampling: { temperature: 0, maxNewTokens: 12, ignoreStopTokens: true } }),
      ),
    );
    return { tokens: results.map((r) => r.tokenIds), graphsDisabled: loaded.runner.graphsDisabled };
  } finally {
    await loaded.close();
  }
}

export const fmt = (errors: Record<string, number>) => JSON.stringify(Object.fromEntries(Object.entries(errors).map(([k, e]) => [k, Number(e.toExponential(2))])));

export const seconds = (t0: number) => ((performance.now() - t0) / 1000).toFixed(1);
