import { describe, expect, test } from "bun:test";
import { expectClose, torch, values } from "../helpers.ts";

export function creationSuite(device: string): void {
  describe(`creation and reading back [${device}]`, () => {
    test("tensor() infers shape from nested arrays and defaults to f32", () => {
      torch.tidy(() => {
        const t = torch.tensor([[1, 2, 3], [4, 5, 6]], undefined, { device });
        expect(t.shape).toEqual([2, 3]);
        expect(t.dtype).toBe("f32");
        expect(t.device).toBe(device === "cpu" ? "cpu" : "cuda:0");
        expect(Array.from(t.toArray() as Float32Array)).toEqual([1, 2, 3, 4, 5, 6]);
        expect(t.toList()).toEqual([[1, 2, 3], [4, 5, 6]]);
        expect(torch.tensor([true, false], undefined, { device }).dtype).toBe("bool");
      });
    });

    test("typed arrays keep their dtype; every dtype round-trips", () => {
      torch.tidy(() => {
        const cases: [ArrayBufferView, string][] = [
          [new Float32Array([1.5, -2]), "f32"],
          [new Float64Array([1.25, 1e300]), "f64"],
          [new BigInt64Array([1n, -(2n ** 40n)]), "i64"],
          [new Int32Array([7, -8]), "i32"],
          [new Uint8Array([0, 255]), "u8"],
          [new Int8Array([-128, 127]), "i8"],
          [new Int16Array([-300, 300]), "i16"],
        ];
        for (const [data, dtype] of cases) {
          const t = torch.tensor(data, undefined, { device });
          expect(t.dtype).toBe(dtype as torch.DType);
          expect(Array.from(t.toArray() as ArrayLike<number | bigint>)).toEqual(Array.from(data as unknown as ArrayLike<number | bigint>));
        }
      });
    });

    test("bf16 and f16 convert with their rounding and read back as f32", () => {
      torch.tidy(() => {
        const t = torch.tensor([1 / 3, 1.5, 65504, 3.0e38], [4], { dtype: "bf16", device });
        expect(t.dtype).toBe("bf16");
        // bf16 keeps 8 mantissa bits: 1/3 -> 0.333984375, 1.5 exact, 65504 -> 65536
        expectClose(t.toArray() as Float32Array, [0.333984375, 1.5, 65536, 3.00405527047391e38], 0, 1e-6);
        const h = torch.tensor([1 / 3, 65504], [2], { dtype: "f16", device });
        expectClose(h.toArray() as Float32Array, [0.333251953125, 65504], 0, 0);
        expect(t.to("f32").dtype).toBe("f32");
        expectClose(t.float().toArray() as Float32Array, t.toArray() as Float32Array, 0, 0);
      });
    });

    test("factories: zeros, ones, full, empty, arange, linspace, eye, *Like", () => {
      torch.tidy(() => {
        expect(values(torch.zeros([2, 2], { device }))).toEqual([0, 0, 0, 0]);
        expect(values(torch.ones([3], { dtype: "i32", device }))).toEqual([1, 1, 1]);
        expect(values(torch.full([2], 2.5, { device }))).toEqual([2.5, 2.5]);
        expect(torch.full([1], true, { device }).dtype).toBe("bool");
        expect(torch.empty([4, 5], { device }).shape).toEqual([4, 5]);
        const a = torch.arange(5, undefined, undefined, { device });
        expect(a.dtype).toBe("i64");
        expect(values(a)).toEqual([0, 1, 2, 3, 4]);
        expect(values(torch.arange(1, 2, 0.25, { device }))).toEqual([1, 1.25, 1.5, 1.75]);
        expect(values(torch.linspace(0, 1, 5, { device }))).toEqual([0, 0.25, 0.5, 0.75, 1]);
        expect(values(torch.eye(2, 3, { device }))).toEqual([1, 0, 0, 0, 1, 0]);
        const like = torch.onesLike(a, { dtype: "f32" });
        expect([like.dtype, ...like.shape]).toEqual(["f32", 5]);
        expect(values(torch.fullLike(a, 7))).toEqual([7, 7, 7, 7, 7]);
        expect(torch.scalarTensor(3, { device }).shape).toEqual([]);
        expect(torch.scalarTensor(3, { device }).item()).toBe(3);
      });
    });

    test("seeded generators reproduce draws; manualSeed reseeds the default stream", () => {
      torch.tidy(() => {
        const g1 = new torch.Generator({ seed: 42, device });
        const g2 = new torch.Generator({ seed: 42, device });
        const a = torch.randn([8], { generator: g1, device });
        const b = torch.randn([8], { generator: g2, device });
        expect(values(a)).toEqual(values(b));
        const c = torch.randn([8], { generator: g1, device });
        expect(values(a)).not.toEqual(values(c));
        torch.manualSeed(7);
        const r1 = values(torch.rand([6], { device }));
        torch.manualSeed(7);
        const r2 = values(torch.rand([6], { device }));
        expect(r1).toEqual(r2);
        for (const v of r1) expect(v >= 0 && v < 1).toBe(true);
        const ints = values(torch.randint(3, 6, [200], { generator: g1, device }));
        expect(Math.min(...ints)).toBe(3);
        expect(Math.max(...ints)).toBe(5);
        g1.dispose();
        g2.dispose();
      });
    });

    test("to() moves between dtypes; item() and toList() read scalars and nests", () => {
      torch.tidy(() => {
        const t = torch.tensor([1.7, -2.2], [2], { device });
        expect(values(t.to("i64"))).toEqual([1, -2]);
        expect(t.to({ dtype: "f64" }).dtype).toBe("f64");
        expect(t.cpu().device).toBe("cpu");
        expectClose(t.sum().item(), -0.5, 1e-6);
        expect(torch.tensor([[true, false]], undefined, { device }).toList()).toEqual([[true, false]]);
        expect(torch.tensor([5], [], { device }).toList()).toBe(5);
        expect(Array.from(t.toInt32Array())).toEqual([1, -2]);
      });
    });

    test("empty tensors work end to end", () => {
      torch.tidy(() => {
        const t = torch.tensor(new Float32Array(0), [0, 3], { device });
        expect(t.shape).toEqual([0, 3]);
        expect(t.toArray().length).toBe(0);
        expect(t.sum().item()).toBe(0);
      });
    });
  });
}
