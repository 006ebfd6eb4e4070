import { describe, expect, test } from "bun:test";
import * as torch from "../../src/torch/index.ts";
import { rowStreamKey } from "../../src/engine/row-streams.ts";
import { sampleRows } from "../../src/engine/sampler.ts";
import { neverSampledIndex } from "../../src/torch/logit-mask.ts";
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

describe("never-sampled ids (a VLM's vision ids)", () => {
  // p = [0.5, 0.3, 0.15, 0.05] with id 0 (the most likely) taken out: the distribution
  // over the rest is [0.3, 0.15, 0.05] / 0.5 = [0.6, 0.3, 0.1].
  test("greedy takes the best other id and reports its log-prob among the others", () => {
    const shared = new torch.Generator({ seed: 1 });
    const out = torch.tidy(() => {
      const never = neverSampledIndex([0], 4, "cpu")!;
      return sampleRows(torch.tensor(Float32Array.from(LOGITS), [1, 4]), [{ temperature: 0, topK: 0, topP: 1 }], shared, undefined, never);
    });
    expect(out.tokenIds[0]).toBe(1);
    expect(out.logprobs[0]).toBeCloseTo(Math.log(0.6), 5);
    shared.dispose();
  });

  test("sampled rows never draw it; each draw's log-prob is its share of the others' mass", () => {
    const shared = new torch.Generator({ seed: 1 });
    const counts = [0, 0, 0, 0];
    torch.tidy(() => {
      const never = neverSampledIndex([0], 4, "cpu")!;
      const logits = torch.tensor(Float32Array.from(LOGITS), [1, 4]);
      for (let s = 0; s < 400; s++) {
        const out = sampleRows(logits, [{ temperature: 1, topK: 0, topP: 1, streamKey: rowStreamKey(s, 0) }], shared, undefined, never);
        const id = out.tokenIds[0]!;
        counts[id]!++;
        expect(out.logprobs[0]).toBeCloseTo(Math.log([0, 0.6, 0.3, 0.1][id]!), 5);
      }
    });
    expect(counts[0]).toBe(0);
    // 400 draws at [0.6, 0.3, 0.1]: 240, 120, 40 expected (3 standard deviations: 29, 27, 18).
    expect(Math.abs(counts[1]! - 240)).toBeLessThan(30);
    expect(Math.abs(counts[2]! - 120)).toBeLessThan(28);
    expect(Math.abs(counts[3]! - 40)).toBeLessThan(19);
    shared.dispose();
  });

  test("the index holds the ids inside the vocabulary; none when nothing is left", () => {
    torch.tidy(() => {
      expect(Array.from(neverSampledIndex([1, 3, 9, -1], 4, "cpu")!.toFloat64Array())).toEqual([1, 3]);
      expect(neverSampledIndex([], 4, "cpu")).toBeUndefined();
      expect(neverSampledIndex([7], 4, "cpu")).toBeUndefined();
    });
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
