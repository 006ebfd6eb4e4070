import { describe, expect, test } from "bun:test";
import { torch, values } from "../helpers.ts";

export function errorsSuite(device: string): void {
  const T = (data: number[], shape: number[], dtype: torch.DType = "f32") => torch.tensor(data, shape, { dtype, device });

  describe(`libtorch errors become TorchError and the process keeps running [${device}]`, () => {
    test("bad shapes", () => {
      torch.tidy(() => {
        const a = T([1, 2, 3, 4, 5, 6], [2, 3]);
        expect(() => a.matmul(a)).toThrow(/cannot be multiplied/);
        expect(() => a.reshape(4, 2)).toThrow(torch.TorchError);
        expect(() => a.view(5)).toThrow(/invalid for input of size 6/);
        expect(() => a.add(T([1, 2], [2]))).toThrow(/must match the size/);
        expect(() => torch.cat([a, T([1], [1])])).toThrow(torch.TorchError);
        // and work continues normally afterwards
        expect(values(a.sum(1))).toEqual([6, 15]);
      });
    });

    test("out-of-range indices and dims", () => {
      torch.tidy(() => {
        const a = T([1, 2, 3], [3]);
        // On CUDA an out-of-range index is caught inside the kernel by a device-side
        // assert, which leaves the CUDA context unusable for the rest of the process
        // (libtorch behaviour); only host-checked errors are exercised there.
        if (device === "cpu") expect(() => a.indexSelect(0, T([5], [1], "i64"))).toThrow(/out of range|index/i);
        expect(() => a.sum(3)).toThrow(/Dimension out of range/);
        expect(() => a.transpose(0, 4)).toThrow(/Dimension out of range/);
        expect(() => a.narrow(0, 2, 5)).toThrow(torch.TorchError);
        expect(() => a.size(2)).toThrow(/out of range/);
      });
    });

    test("dtype and device mismatches", () => {
      torch.tidy(() => {
        const f = T([1, 2], [2]);
        const idx = T([0.5], [1]);
        expect(() => f.indexSelect(0, idx)).toThrow(/Long|Int|index/);
        expect(() => torch.zeros([2], { device: "tpu" })).toThrow(/unknown device "tpu"/);
        if (device === "cpu" && !torch.cuda.isAvailable()) {
          expect(() => f.to("cuda")).toThrow(torch.TorchError);
        } else {
          const other = device === "cpu" ? f.to("cuda") : f.to("cpu");
          expect(() => f.add(other.mul(T([1], [1]).to(other.device)).unsqueeze(0).expand(2, 2))).toThrow(/same device|Expected all tensors/);
        }
      });
    });

    test("a disposed tensor cannot be used, and disposing twice is harmless", () => {
      const t = T([1, 2], [2]);
      t.dispose();
      t.dispose();
      expect(t.isDisposed).toBe(true);
      expect(() => t.add(1)).toThrow(/disposed tensor/);
      expect(t.toString()).toBe("Tensor(disposed)");
    });

    test("shape validation in factories names the problem", () => {
      expect(() => torch.zeros([2, -1])).toThrow(/non-negative integers/);
      expect(() => torch.tensor([1, 2, 3], [2, 2])).toThrow(/do not fill shape/);
      expect(() => torch.fromTypedArray(new Float32Array(3), [2])).toThrow(/do not fit shape/);
      expect(() => torch.fromTypedArray(new Uint16Array(3) as unknown as Float32Array, [3])).toThrow(/Uint16Array/);
    });
  });
}
