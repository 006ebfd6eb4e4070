/**
 * The engine on CUDA: CUDA-graph decode steps give what eager steps give, batched equals
 * one at a time, sessions equal fresh prefills, and the Qwen2.5-VL fixture still matches
 * transformers' greedy tokens. Skipped without a CUDA build of the shim and a GPU.
 */
import { describe, expect, test } from "bun:test";
import * as torch from "../../src/torch/index.ts";
import { Engine } from "../../src/engine/engine.ts";
import { ModelRunner } from "../../src/engine/model-runner.ts";
import { loadEngine } from "../../src/engine/load.ts";
import type { GenerationResult, Prompt } from "../../src/engine/types.ts";
import { ToyModel, TOY_CONFIG } from "../engine/toy-model.ts";
import { FIXTURE_DIR, refsJson } from "../models/fixture.ts";

function cudaAvailable(): boolean {
  try {
    return torch.torchInfo().cudaDevices > 0;
  } catch {
    return false;
  }
}

const text = (...ids: number[]): Prompt => ({ tokenIds: ids, images: [] });
const decode = (ids: readonly number[]) => ids.join(" ");

function maxAbsDiff(a: Float32Array, b: Float32Array): number {
  let m = 0;
  for (let i = 0; i < a.length; i++) m = Math.max(m, Math.abs(a[i]! - b[i]!));
  return m;
}

/**
 * Half-precision runs use math attention: with the libtorch 2.11 build the fused SDPA
 * kernels crash the process on bf16 inputs (any call, reported to the tensor library).
 */
const HALF_ATTENTION_IS_MATH = true;

async function run(model: ToyModel, cudaGraphs: boolean, prompts: Prompt[], lengths: number[], together: boolean): Promise<GenerationResult[]> {
  const mathAttention = model.spec.dtype !== "f32" && HALF_ATTENTION_IS_MATH;
  const runner = new ModelRunner(model, { slots: 8, slotTokens: 512, cudaGraphs, mathAttention });
  const engine = new Engine(runner, { decode });
  const req = (i: number) => engine.generate({ prompt: prompts[i]!, sampling: { temperature: 0, maxNewTokens: lengths[i]! }, returnLogits: true });
  const out: GenerationResult[] = [];
  if (together) out.push(...(await Promise.all(prompts.map((_, i) => req(i)))));
  else for (let i = 0; i < prompts.length; i++) out.push(await req(i));
  if (cudaGraphs) expect(runner.graphs!.captures).toBeGreaterThan(0);
  await engine.close();
  return out;
}

describe.skipIf(!cudaAvailable())("engine on CUDA", () => {
  const prompts = [text(1, 2, 3, 4, 5), text(9, 8), text(7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7), text(30)];
  const lengths = [20, 7, 12, 300]; // the last crosses attention-window buckets (256 -> 512)

  test("f32: graphed decode equals eager decode, batched equals one at a time", async () => {
    const model = new ToyModel(TOY_CONFIG, { device: "cuda", dtype: "f32" });
    const eagerSolo = await run(model, false, prompts, lengths, false);
    const graphSolo = await run(model, true, prompts, lengths, false);
    const graphBatch = await run(model, true, prompts, lengths, true);
    for (let i = 0; i < prompts.length; i++) {
      expect(graphSolo[i]!.tokenIds).toEqual(eagerSolo[i]!.tokenIds);
      expect(graphBatch[i]!.tokenIds).toEqual(eagerSolo[i]!.tokenIds);
      for (let j = 0; j < eagerSolo[i]!.tokenIds.length; j++) {
        expect(maxAbsDiff(graphBatch[i]!.logits![j]!, eagerSolo[i]!.logits![j]!)).toBeLessThan(1e-4);
      }
    }
    // And the eager path equals a cache-free forward.
    const p = prompts[0]!;
    const ref = model.referenceLogits(text(...p.tokenIds, ...eagerSolo[0]!.tokenIds.slice(0, 10)));
    const V = model.spec.vocabSize;
    const n = p.tokenIds.length + 10;
    expect(maxAbsDiff(graphBatch[0]!.logits![10]!, ref.slice((n - 1) * V, n * V))).toBeLessThan(1e-4);
    model.dispose();
  });

  test("bf16: graphed and eager decode agree", async () => {
    const model = new ToyModel(TOY_CONFIG, { device: "cuda", dtype: "bf16" });
    const eager = await run(model, false, prompts.slice(0, 3), lengths.slice(0, 3), true);
    const graphed = await run(model, true, prompts.slice(0, 3), lengths.slice(0, 3), true);
    for (let i = 0; i < 3; i++) {
      expect(maxAbsDiff(graphed[i]!.logits![0]!, eager[i]!.logits![0]!)).toBeLessThan(5e-2);
      expect(graphed[i]!.tokenIds.slice(0, 4)).toEqual(eager[i]!.tokenIds.slice(0, 4));
    }
    model.dispose();
  });

  test("Qwen2.5-VL fixture on CUDA (f32, graphs): greedy tokens match transformers, batched", async () => {
    const refs = refsJson();
    const loaded = loadEngine(FIXTURE_DIR, { device: "cuda", dtype: "f32", max_seq_len: 512, kv_cache_gib: 0.1, max_slots: 8 });
    const prompts = ["text"].map((name) => ({ tokenIds: refs.cases[name]!.input_ids!, images: [] }));
    const results = await Promise.all(
      [...prompts, ...prompts].map((prompt) =>
        loaded.engine.generate({ prompt, sampling: { temperature: 0, maxNewTokens: refs.cases.text!.greedy!.length, ignoreStopTokens: true } }),
      ),
    );
    for (const r of results) expect(r.tokenIds).toEqual(refs.cases.text!.greedy!);
    expect(loaded.runner.graphs!.captures).toBeGreaterThan(0);
    await loaded.close();
  });
});
