import { describe, expect, test } from "bun:test";
import { LruMap } from "../../src/core/lru.ts";

describe("LruMap", () => {
  test("keeps the most recently used entries, a get refreshing one", () => {
    const m = new LruMap<string, number>(2);
    m.set("a", 1);
    m.set("b", 2);
    expect(m.get("a")).toBe(1); // a is now newer than b
    m.set("c", 3);
    expect([m.get("a"), m.get("b"), m.get("c")]).toEqual([1, undefined, 3]);
    expect(m.size).toBe(2);
  });

  test("getOrMake makes a value once", () => {
    const m = new LruMap<string, number>(4);
    let made = 0;
    const make = () => ++made;
    expect([m.getOrMake("x", make), m.getOrMake("x", make), m.getOrMake("y", make)]).toEqual([1, 1, 2]);
  });

  test("refuses a capacity that is not a positive integer", () => {
    expect(() => new LruMap(0)).toThrow(/positive integer/);
    expect(() => new LruMap(1.5)).toThrow(/positive integer/);
  });
});
