import { describe, expect, test } from "bun:test";
import { SeededRandom, argmax, sampleToken } from "../../src/models/sampling.ts";

const logits = Float32Array.from([1, 3, 2, 0.5, 2.9]);

describe("sampleToken", () => {
  test("greedy picks the first maximum and reports its log-probability", () => {
    const s = sampleToken(logits, { temperature: 0, topP: 1 }, new SeededRandom(0));
    expect(s.token).toBe(1);
    const lse = Math.log([...logits].reduce((a, x) => a + Math.exp(x), 0));
    expect(s.logprob).toBeCloseTo(3 - lse, 6);
    expect(argmax([2, 5, 5, 1])).toBe(1);
  });

  test("the same seed gives the same tokens", () => {
    const run = (seed: number) => {
      const rng = new SeededRandom(seed);
      return Array.from({ length: 20 }, () => sampleToken(logits, { temperature: 1, topP: 1 }, rng).token);
    };
    expect(run(7)).toEqual(run(7));
    expect(run(7)).not.toEqual(run(8));
  });

  test("top-p keeps only the nucleus", () => {
    // probabilities at T=1: token 1 and 4 carry ~0.64 together; topP 0.5 keeps tokens 1 and 4
    const rng = new SeededRandom(3);
    const seen = new Set<number>();
    for (let i = 0; i < 200; i++) seen.add(sampleToken(logits, { temperature: 1, topP: 0.5 }, rng).token);
    expect([...seen].sort()).toEqual([1, 4]);
  });

  test("temperature sharpens: sampled frequencies follow softmax(logits / T)", () => {
    const rng = new SeededRandom(11);
    const counts = new Array(5).fill(0);
    const n = 4000;
    for (let i = 0; i < n; i++) counts[sampleToken(logits, { temperature: 0.5, topP: 1 }, rng).token]++;
    const z = [...logits].map((x) => Math.exp(x / 0.5));
    const total = z.reduce((a, b) => a + b, 0);
    z.forEach((p, i) => expect(Math.abs(counts[i] / n - p / total)).toBeLessThan(0.03));
  });

  test("log-probabilities are those of the tempered distribution", () => {
    const s = sampleToken(logits, { temperature: 2, topP: 1 }, new SeededRandom(1));
    const lse = Math.log([...logits].reduce((a, x) => a + Math.exp(x / 2), 0));
    expect(s.logprob).toBeCloseTo(logits[s.token]! / 2 - lse, 6);
  });
});
