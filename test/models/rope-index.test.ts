import { describe, expect, test } from "bun:test";
import { computeRopeIndex } from "../../src/models/qwen2_5_vl/rope-index.ts";
import { visionLayout } from "../../src/models/qwen2_5_vl/vision-layout.ts";
import { ref, refsJson } from "./fixture.ts";

const IMAGE_TOKEN = 366; // the tiny fixture's <|image_pad|>

function rows(name: string, key: string): number[][] {
  const t = ref(`${name}.${key}`);
  const [B, T] = t.shape as [number, number];
  return Array.from({ length: B }, (_, b) => Array.from(t.values.subarray(b * T, (b + 1) * T)));
}

function grids(name: string): number[][] {
  if (!refsJson().cases[name]?.image_keys?.length && !name.startsWith("batch")) return [];
  const t = ref(`${name}.image_grid_thw`);
  return Array.from({ length: t.shape[0]! }, (_, i) => Array.from(t.values.subarray(i * 3, i * 3 + 3)));
}

describe("computeRopeIndex", () => {
  for (const name of ["text", "one_image", "two_images", "batch_left", "batch_right"]) {
    test(`matches transformers' position ids for ${name}`, () => {
      const isBatch = name.startsWith("batch");
      const { positionIds } = computeRopeIndex({
        inputIds: rows(name, "input_ids"),
        attentionMask: isBatch ? rows(name, "attention_mask") : undefined,
        imageGridThw: grids(name),
        imageTokenId: IMAGE_TOKEN,
        spatialMergeSize: 2,
      });
      expect(positionIds.flat(2)).toEqual(Array.from(ref(`${name}.position_ids`).values));
    });
  }

  test("deltas continue decoding after the largest position", () => {
    // text(2) image 1x4x6 -> merged 2x3 grid, then text(1)
    const ids = [[1, 2, 9, 9, 9, 9, 9, 9, 3]];
    const { positionIds, ropeDeltas } = computeRopeIndex({ inputIds: ids, imageGridThw: [[1, 4, 6]], imageTokenId: 9, spatialMergeSize: 2 });
    expect(positionIds[0]![0]).toEqual([0, 1, 2, 2, 2, 2, 2, 2, 5]);
    expect(positionIds[1]![0]).toEqual([0, 1, 2, 2, 2, 3, 3, 3, 5]);
    expect(positionIds[2]![0]).toEqual([0, 1, 2, 3, 4, 2, 3, 4, 5]);
    expect(ropeDeltas).toEqual([6 - 9]);
  });

  test("rejects a span shorter than its grid", () => {
    expect(() => computeRopeIndex({ inputIds: [[9, 9, 1]], imageGridThw: [[1, 4, 4]], imageTokenId: 9, spatialMergeSize: 2 })).toThrow(/shorter/);
  });
});

describe("visionLayout", () => {
  test("windows of 4x4 merged blocks over a 5x6 block image", () => {
    const layout = visionLayout([[1, 10, 12]], { spatialMergeSize: 2, windowSize: 112, patchSize: 14 });
    // windows: rows 0-3 x cols 0-3 (16), rows 0-3 x cols 4-5 (8), row 4 x cols 0-3 (4), row 4 x cols 4-5 (2)
    expect(layout.windowSeqlens).toEqual([0, 64, 96, 112, 120]);
    expect(layout.fullSeqlens).toEqual([0, 120]);
    expect(Array.from(layout.windowIndex.subarray(0, 5))).toEqual([0, 1, 2, 3, 6]);
    expect(Array.from(layout.windowIndex.subarray(16, 18))).toEqual([4, 5]);
    for (let i = 0; i < layout.windowIndex.length; i++) expect(layout.reverseIndex[layout.windowIndex[i]!]).toBe(i);
    // patch 5 sits in block 1 (row 0, col 1), its second patch: row 0, col 3
    expect([layout.rotaryPositions[10], layout.rotaryPositions[11]]).toEqual([0, 3]);
    expect(layout.maxGridSide).toBe(12);
  });

  test("several images keep their own windows and full-attention segments", () => {
    const layout = visionLayout([[1, 4, 4], [1, 6, 8]], { spatialMergeSize: 2, windowSize: 112, patchSize: 14 });
    expect(layout.fullSeqlens).toEqual([0, 16, 64]);
    expect(layout.windowSeqlens).toEqual([0, 16, 64]);
  });
});
