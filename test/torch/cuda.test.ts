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
    }
  });
});
