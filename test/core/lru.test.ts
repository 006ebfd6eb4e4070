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

  test("with sizeOf, the sizes of the kept entries sum to at most the capacity; a larger entry is not kept", () => {
    const m = new LruMap<string, Uint8Array>(10, (v) => v.byteLength);
    m.set("a", new Uint8Array(4));
    m.set("b", new Uint8Array(4));
    m.get("a");
    m.set("c", new Uint8Array(4)); // 12 > 10: b, the least recently used, goes
    expect([m.get("a") !== undefined, m.get("b") !== undefined, m.get("c") !== undefined]).toEqual([true, false, true]);
    m.set("big", new Uint8Array(11));
    expect(m.get("big")).toBeUndefined();
    expect(m.size).toBe(2);
    // Replacing an entry counts its new size only.
    m.set("a", new Uint8Array(6));
    expect([m.get("a")?.byteLength, m.get("c")?.byteLength]).toEqual([6, 4]);
  });

  test("refuses a capacity that is not a positive integer", () => {
    expect(() => new LruMap(0)).toThrow(/positive integer/);
    expect(() => new LruMap(1.5)).toThrow(/positive integer/);
  });
});
