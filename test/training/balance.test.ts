/**
 * The update's row balancer (balanceRows: longest first onto the least-loaded rank) by
 * hand, and the wire form a row's images travel in when its row moves to another rank.
 */
import { describe, expect, test } from "bun:test";
import { balanceGroups, balanceRows, decodeRowImages, encodeRowImages, rowTokens } from "../../src/training/data-parallel.ts";
import { handRow } from "./rows.ts";

describe("balanceRows", () => {
  test("longest first, each onto the rank with the fewest tokens so far", () => {
    // 9 (row 1) -> 0; 7 (row 3) -> 1; 5 (row 0) -> 1 (7 < 9); 3 (row 2) -> 0 (9 < 12); 2 (row 4) -> 0 (12 = 12: the lower rank)
    expect(balanceRows([5, 9, 3, 7, 2], 2)).toEqual([1, 0, 0, 1, 0]);
    // equal lengths: the earlier row first, dealt round-robin
    expect(balanceRows([4, 4, 4, 4, 4], 2)).toEqual([0, 1, 0, 1, 0]);
    // 3 ranks: 10 -> 0, 6 -> 1, 5 -> 2, 4 -> 2 (5 < 6), 1 -> 1 (6 < 9)
    expect(balanceRows([1, 10, 4, 6, 5], 3)).toEqual([1, 0, 2, 1, 2]);
    expect(balanceRows([3, 2], 1)).toEqual([0, 0]);
    expect(balanceRows([], 2)).toEqual([]);
  });

  test("one long row against many short ones: the short ones fill the other rank", () => {
    expect(balanceRows([100, 10, 10, 10, 10, 10, 10], 2)).toEqual([0, 1, 1, 1, 1, 1, 1]);
  });

  test("balanceGroups keeps a group's rows on one rank, groups dealt by their token sums", () => {
    const row = (uid: string, n: number) => handRow({ uid, prompt: new Array(n - 1).fill(1), response: [2] });
    // groups: a = 3 + 3 = 6 tokens, b = 10, c = 4 + 4 = 8, d = 2
    const rows = [row("a", 3), row("b", 10), row("a", 3), row("c", 4), row("d", 2), row("c", 4)];
    // b (10) -> 0, c (8) -> 1, a (6) -> 1 (8 < 10), d (2) -> 0 (10 < 14)
    expect(balanceGroups(rows, 2)).toEqual([1, 0, 1, 1, 0, 1]);
    expect(balanceGroups(rows, 1)).toEqual([0, 0, 0, 0, 0, 0]);
  });

  test("a row's tokens are its prompt and response", () => {
    const row = handRow({ uid: "train-0-0", prompt: [1, 2, 3], response: [4, 5] });
    expect(rowTokens(row)).toBe(5);
  });
});

describe("row images on the wire", () => {
  test("pixels, sizes, offsets and grids come back unchanged", () => {
    const a = { width: 2, height: 1, data: new Uint8Array([0, 1, 2, 253, 254, 255]) };
    const b = { width: 1, height: 2, data: new Uint8Array([9, 8, 7, 6, 5, 4]) };
    const images = [
      { offset: 3, length: 4, grid: [1, 2, 2], image: a },
      { offset: 10, length: 1, grid: [1, 1, 1], image: b },
    ];
    const wire = encodeRowImages(images);
    // 4-byte length, the JSON, then 12 bytes of pixels
    expect(wire.length).toBe(4 + new DataView(wire.buffer).getUint32(0, true) + 12);
    const back = decodeRowImages(wire);
    expect(back.map((m) => ({ ...m, image: { ...m.image, data: Array.from(m.image.data) } }))).toEqual(images.map((m) => ({ ...m, image: { ...m.image, data: Array.from(m.image.data) } })));
    expect(decodeRowImages(encodeRowImages([]))).toEqual([]);
  });

  test("a truncated message is refused", () => {
    const wire = encodeRowImages([{ offset: 0, length: 1, grid: [1, 1, 1], image: { width: 2, height: 2, data: new Uint8Array(12) } }]);
    expect(() => decodeRowImages(wire.subarray(0, wire.length - 1))).toThrow(/needs 12 bytes/);
  });
});
