/** setNumThreads sets libtorch's intra-op CPU threads (the demo's CPU recipe runs on one). */
import { expect, test } from "bun:test";
import * as torch from "../../src/torch/index.ts";

test("setNumThreads changes the count torchInfo reports, and refuses a non-positive one", () => {
  const before = torch.torchInfo().threads;
  try {
    torch.setNumThreads(1);
    expect(torch.torchInfo().threads).toBe(1);
    torch.setNumThreads(2);
    expect(torch.torchInfo().threads).toBe(2);
    expect(() => torch.setNumThreads(0)).toThrow(/expected a positive integer/);
    expect(() => torch.setNumThreads(1.5)).toThrow(/expected a positive integer/);
  } finally {
    torch.setNumThreads(before);
  }
  expect(torch.torchInfo().threads).toBe(before);
});
