import { describe, expect, test } from "bun:test";
import * as torch from "../../src/torch/index.ts";
import { rowStreamKey } from "../../src/engine/row-streams.ts";
import { sampleRows } from "../../src/engine/sampler.ts";
import { kvBytesPerToken, planKvCache } from "../../src/engine/kv-cache.ts";
import type { ModelSpec } from "../../src/models/family.ts";

/** log-probabilities of [0.5, 0.3, 0.15, 0.05] as logits. */
const LOGITS = [0.5, 0.3, 0.15, 0.05].map(Math.log);

function draw(opts: { topK?: number; topP?: number; temperature?: number }, seeds: number): Set<number> {
  const seen = new Set<number>();
  const shared = new torch.Generator({ seed: 1 });
  torch.tidy(() => {
    const logits = torch.tensor(Float32Array.from([...LOGITS, ...LOGITS]), [2, 4]);
    for (let s = 0; s < seeds; s++) {
      const row = { temperature: opts.temperature ?? 1, topK: opts.topK ?? 0, topP: opts.topP ?? 1, streamKey: rowStreamKey(s, 0) };
      const out = sampleRows(logits, [row, { ...row, streamKey: undefined }], shared);
      out.tokenIds.forEach((t) => seen.add(t));
    }
  });
  shared.dispose();
  return seen;
}

describe("device sampling", () => {
  test("top-k keeps the k most likely tokens; top-p keeps the smallest set reaching p", () => {
    expect(draw({}, 200)).toEqual(new Set([0, 1, 2, 3]));
    expect(draw({ topK: 2 }, 200)).toEqual(new Set([0, 1]));
    // 0.5 < 0.7 so token 1 is needed; 0.5 + 0.3 >= 0.7 so token 2 is not.
    expect(draw({ topP: 0.7 }, 200)).toEqual(new Set([0, 1]));
    expect(draw({ topP: 0.81 }, 200)).toEqual(new Set([0, 1, 2]));
    expect(draw({ topK: 3, topP: 0.5 }, 100)).toEqual(new Set([0]));
  });

  test("greedy rows take the argmax and report the raw log-softmax", () => {
    const shared = new torch.Generator({ seed: 1 });
    const out = torch.tidy(() =>
      sampleRows(torch.tensor(Float32Array.from(LOGITS), [1, 4]), [{ temperature: 0, topK: 0, topP: 1 }], shared),
    );
    expect(out.tokenIds[0]).toBe(0);
    expect(out.logprobs[0]).toBeCloseTo(Math.log(0.5), 5);
    shared.dispose();
  });
});

describe("KV cache sizing", () => {
  const spec: ModelSpec = {
    numLayers: 36, numHeads: 16, numKvHeads: 2, headDim: 128, hiddenSize: 2048, vocabSize: 151936,
    positionAxes: 3, dtype: "bf16", device: "cpu", maxPositions: 128000, weightBytes: 0,
  };

  test("bytes per token and slots from a memory budget (one scratch slot on top)", () => {
    expect(kvBytesPerToken(spec)).toBe(36 * 2 * 2 * 128 * 2);
    const plan = planKvCache(spec, { maxSeqLen: 4096, memoryBytes: 8 * 2 ** 30 });
    expect(plan.slots).toBe(Math.floor((8 * 2 ** 30) / (36864 * 4096)) - 1);
    expect(plan.bytes).toBe((plan.slots + 1) * 36864 * 4096);
    expect(planKvCache(spec, { maxSeqLen: 4096, memoryBytes: 8 * 2 ** 30, maxSlots: 10 }).slots).toBe(10);
  });

  test("a budget too small for one sequence is a clear error", () => {
    expect(() => planKvCache(spec, { maxSeqLen: 8192, memoryBytes: 2 ** 28 })).toThrow(/holds no 8192-token sequence/);
  });
});
