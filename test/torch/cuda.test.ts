import { describe, expect, test } from "bun:test";
import { cudaAvailable, torch } from "./helpers.ts";

describe("CUDA API without a GPU", () => {
  test.if(!cudaAvailable)("reports no devices and explains itself", () => {
    expect(torch.cuda.isAvailable()).toBe(false);
    expect(torch.cuda.deviceCount()).toBe(0);
    const info = torch.torchInfo();
    expect(info.torchVersion).toMatch(/^\d+\.\d+/);
    if (!info.cudaBuild) {
      expect(() => torch.cuda.synchronize()).toThrow(/no CUDA support/);
      expect(() => torch.cuda.memoryStats()).toThrow(torch.TorchError);
      expect(() => new torch.cuda.CUDAGraph()).toThrow(torch.TorchError);
      expect(() => torch.arange(3).pinMemory()).toThrow(/page-locked memory needs a CUDA build/);
    }
    expect(torch.arange(3).isPinned).toBe(false);
  });
});

describe("backend switches", () => {
  test("cuDNN flags read back what was set and restore", () => {
    const before = torch.cuda.cudnn();
    expect(torch.cuda.cudnn({ benchmark: !before.benchmark }).benchmark).toBe(!before.benchmark);
    expect(torch.cuda.cudnn().enabled).toBe(before.enabled);
    expect(torch.cuda.cudnn(before)).toEqual(before);
  });

  test("fused kernels exist only in CUDA builds with nvcc, and can be switched off", () => {
    const on = torch.F.fusedKernels();
    expect(torch.torchInfo().fusedKernels).toBe(on);
    if (!torch.torchInfo().cudaBuild) expect(on).toBe(false);
    expect(torch.F.fusedKernels(false)).toBe(false);
    torch.F.fusedKernels(true);
    expect(torch.F.fusedKernels()).toBe(on);
  });
});
