import { describe, expect, test } from "bun:test";
import { Rng, nextRetrySeed, stableHash32, toSeed32 } from "../../src/core/rng.ts";

describe("seeded randomness", () => {
  test("the stream for a seed is pinned (same on every machine)", () => {
    const rng = new Rng(42);
    expect([rng.nextUint32(), rng.nextUint32(), rng.nextUint32()]).toEqual([1028872839, 2516511472, 400437680]);
  });

  test("FNV-1a hash matches the published test vectors", () => {
    expect(stableHash32("")).toBe(0x811c9dc5);
    expect(stableHash32("a")).toBe(0xe40c292c);
    expect(stableHash32("foobar")).toBe(0xbf9cf968);
  });

  test("retry seeds are a deterministic chain", () => {
    expect(nextRetrySeed(0)).toBe(stableHash32("0"));
    expect(nextRetrySeed(nextRetrySeed(7))).toBe(stableHash32(String(stableHash32("7"))));
  });

  test("odd seeds are reduced by hashing, uint32 seeds kept", () => {
    expect(toSeed32(123)).toBe(123);
    expect(toSeed32(-1)).toBe(stableHash32("-1"));
    expect(toSeed32(2 ** 40)).toBe(stableHash32(String(2 ** 40)));
  });

  test("streams of one seed differ; int() stays in range and covers it", () => {
    expect(new Rng(5, 0).nextUint32()).not.toBe(new Rng(5, 1).nextUint32());
    const rng = new Rng(9);
    const counts = new Array(6).fill(0);
    for (let i = 0; i < 6000; i++) counts[rng.int(6)]++;
    for (const c of counts) expect(c).toBeGreaterThan(850);
    for (let i = 0; i < 100; i++) {
      const x = rng.intInclusive(1, 3);
      expect(x >= 1 && x <= 3).toBe(true);
    }
    expect(() => rng.int(0)).toThrow();
  });
});
