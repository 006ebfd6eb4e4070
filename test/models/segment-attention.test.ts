import { describe, expect, test } from "bun:test";
import * as torch from "../../src/torch/index.ts";
import { F, type Tensor } from "../../src/torch/index.ts";
import { SEGMENT_MASK_MAX_ROWS, disposeSegmentLayout, segmentAttention, segmentLayout } from "../../src/models/segment-attention.ts";
import { Qwen25VLModel } from "../../src/models/qwen2_5_vl/model.ts";
import { FIXTURE_DIR } from "./fixture.ts";

const HEADS = 2;
const HEAD_DIM = 4;

/** Random (n, heads, headDim) q, k, v from a fixed seed. */
function qkv(n: number, seed: number): [Tensor, Tensor, Tensor] {
  const gen = new torch.Generator({ seed, device: "cpu" });
  return [0, 1, 2].map(() => torch.randn([n, HEADS, HEAD_DIM], { dtype: "f32", generator: gen })) as [Tensor, Tensor, Tensor];
}

/** The reference: each segment attended on its own, one call a segment. */
function perSegment(q: Tensor, k: Tensor, v: Tensor, bounds: number[], scale: number): number[] {
  const out: number[] = [];
  for (let s = 0; s + 1 < bounds.length; s++) {
    const part = (t: Tensor) => t.narrow(0, bounds[s]!, bounds[s + 1]! - bounds[s]!).transpose(0, 1).unsqueeze(0);
    const o = F.scaledDotProductAttention(part(q), part(k), part(v), { scale });
    out.push(...o.squeeze(0).transpose(0, 1).contiguous().toFloat32Array());
  }
  return out;
}

function expectClose(got: Float32Array, want: number[]): void {
  expect(got.length).toBe(want.length);
  const worst = want.reduce((m, w, i) => Math.max(m, Math.abs(w - got[i]!)), 0);
  expect(worst).toBeLessThan(1e-5);
}

describe("segmentAttention", () => {
  // Qwen2.5-VL's windows of a 12 x 12-patch image (8 x 8, 8 x 4, 4 x 8, 4 x 4), twice, and
  // a 6-row segment: lengths in no sorted order, so grouping must reorder and restore.
  const bounds = [0, 64, 96, 128, 144, 208, 240, 272, 288, 294];
  const n = bounds.at(-1)!;
  const scale = HEAD_DIM ** -0.5;

  test("mixed lengths, grouped by length: equal to attending each segment alone", () => {
    torch.tidy(() => {
      const [q, k, v] = qkv(n, 1);
      const layout = segmentLayout(bounds, n, "cpu", 0);
      expect(layout.mask).toBeUndefined();
      expect(layout.groups.map((g) => [g.length, g.count])).toEqual([[6, 1], [16, 2], [32, 4], [64, 2]]);
      expectClose(segmentAttention(q, k, v, layout, scale).contiguous().toFloat32Array(), perSegment(q, k, v, bounds, scale));
      disposeSegmentLayout(layout);
    });
  });

  test("mixed lengths through the block-diagonal mask (small inputs): the same", () => {
    torch.tidy(() => {
      const [q, k, v] = qkv(n, 2);
      const layout = segmentLayout(bounds, n, "cpu");
      expect(layout.mask).toBeDefined();
      expectClose(segmentAttention(q, k, v, layout, scale).contiguous().toFloat32Array(), perSegment(q, k, v, bounds, scale));
      disposeSegmentLayout(layout);
    });
  });

  test("an empty segment is dropped (no rows, no batch); bounds that do not rise from 0 to n are refused", () => {
    torch.tidy(() => {
      const withEmpty = [0, 16, 16, 32];
      const [q, k, v] = qkv(32, 5);
      const layout = segmentLayout(withEmpty, 32, "cpu", 0);
      expect(layout.groups).toEqual([{ start: 0, count: 2, length: 16 }]);
      expectClose(segmentAttention(q, k, v, layout, scale).contiguous().toFloat32Array(), perSegment(q, k, v, [0, 16, 32], scale));
      expect(() => segmentLayout([0, 16, 30], 32, "cpu")).toThrow(/must rise from 0 to the 32 rows/);
      expect(() => segmentLayout([0, 20, 10, 32], 32, "cpu")).toThrow(/must rise/);
    });
  });

  test("segments of one length: one batch, no reordering", () => {
    torch.tidy(() => {
      const even = [0, 16, 32, 48];
      const [q, k, v] = qkv(48, 3);
      const layout = segmentLayout(even, 48, "cpu", 0);
      expect(layout.order).toBeUndefined();
      expect(layout.groups).toEqual([{ start: 0, count: 3, length: 16 }]);
      expectClose(segmentAttention(q, k, v, layout, scale).contiguous().toFloat32Array(), perSegment(q, k, v, even, scale));
    });
  });

  test("a row attends to its own segment only: changing another segment's values leaves it", () => {
    torch.tidy(() => {
      const [q, k, v] = qkv(n, 4);
      const layout = segmentLayout(bounds, n, "cpu", 0);
      const before = segmentAttention(q, k, v, layout, scale).contiguous().toFloat32Array();
      const v2 = v.clone();
      torch.noGrad(() => v2.narrow(0, 64, 32).fill_(100));
      const after = segmentAttention(q, k, v2, layout, scale).contiguous().toFloat32Array();
      const row = HEADS * HEAD_DIM;
      // rows 0-63 and 96-293 are outside [64, 96): unchanged; rows inside it all changed
      expect(Array.from(after.subarray(0, 64 * row))).toEqual(Array.from(before.subarray(0, 64 * row)));
      expect(Array.from(after.subarray(96 * row))).toEqual(Array.from(before.subarray(96 * row)));
      expect(after.subarray(64 * row, 96 * row).every((x) => Math.abs(x - 100) < 1e-3)).toBe(true);
    });
  });
});

describe("Qwen2.5-VL's vision tower over many images", () => {
  test("a batch past the mask's size (windows grouped by length) encodes each image as it does alone (through the mask)", () => {
    const model = Qwen25VLModel.load(FIXTURE_DIR, { device: "cpu", dtype: "f32" });
    torch.noGrad(() =>
      torch.tidy(() => {
        // 12 x 12 patches: windows of 8 x 8 patches leave 8 x 4, 4 x 8 and 4 x 4 ones.
        const images = Math.ceil((SEGMENT_MASK_MAX_ROWS + 1) / 144);
        const grid = [1, 12, 12];
        const patchDim = 3 * 2 * 14 * 14;
        const gen = new torch.Generator({ seed: 5, device: "cpu" });
        const pixels = torch.randn([images * 144, patchDim], { dtype: "f32", generator: gen });
        const together = model.vision.encode(pixels, Array(images).fill(grid)).toFloat32Array();
        const alone = Array.from({ length: images }, (_, i) => Array.from(model.vision.encode(pixels.narrow(0, i * 144, 144), [grid]).toFloat32Array())).flat();
        expectClose(together, alone);
      }),
    );
  });
});
