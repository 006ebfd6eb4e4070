import { describe, expect, test } from "bun:test";
import { rankPlacement, type PlacementInput } from "../../src/training/ranks.ts";

const gpu = (over: Partial<PlacementInput>): PlacementInput => ({ device: "cuda", backend: "auto", localRank: 0, localWorld: 2, gpus: 2, ncclBuilt: true, ...over });

describe("rankPlacement", () => {
  test("a GPU each: NCCL on cuda:LOCAL_RANK", () => {
    expect(rankPlacement(gpu({ localRank: 1 }))).toEqual({ backend: "nccl", device: "cuda:1", gpu: 1 });
  });

  test("two ranks on one GPU: Gloo, both on cuda:0 (NCCL refuses a shared GPU)", () => {
    expect(rankPlacement(gpu({ localRank: 0, gpus: 1 }))).toEqual({ backend: "gloo", device: "cuda:0", gpu: 0 });
    expect(rankPlacement(gpu({ localRank: 1, gpus: 1 }))).toEqual({ backend: "gloo", device: "cuda:0", gpu: 0 });
  });

  test("more ranks than GPUs share them round-robin", () => {
    expect(rankPlacement(gpu({ localRank: 3, localWorld: 4, gpus: 2 }))).toEqual({ backend: "gloo", device: "cuda:1", gpu: 1 });
  });

  test("a shim without NCCL: Gloo on the GPUs", () => {
    expect(rankPlacement(gpu({ ncclBuilt: false, localRank: 1 }))).toEqual({ backend: "gloo", device: "cuda:1", gpu: 1 });
  });

  test("gloo asked for: Gloo even with a GPU each", () => {
    expect(rankPlacement(gpu({ backend: "gloo", localRank: 1 }))).toEqual({ backend: "gloo", device: "cuda:1", gpu: 1 });
  });

  test("the CPU: Gloo", () => {
    expect(rankPlacement({ device: "cpu", backend: "auto", localRank: 1, localWorld: 2, gpus: 0, ncclBuilt: false })).toEqual({ backend: "gloo", device: "cpu" });
  });

  test("nccl that cannot work is refused, naming the key", () => {
    expect(() => rankPlacement(gpu({ backend: "nccl", gpus: 1 }))).toThrow(/trainer\.dist_backend.*2 ranks on 1 GPU.*refuses/);
    expect(() => rankPlacement(gpu({ backend: "nccl", ncclBuilt: false }))).toThrow(/trainer\.dist_backend.*no NCCL/);
    expect(() => rankPlacement({ device: "cpu", backend: "nccl", localRank: 0, localWorld: 2, gpus: 0, ncclBuilt: false })).toThrow(/trainer\.dist_backend.*cpu/);
    expect(() => rankPlacement(gpu({ gpus: 0 }))).toThrow(/sees no GPU/);
  });
});

describe("vagen train trainer.n_gpus_per_node=2 with a placement that cannot work", () => {
  test("is refused once, before any rank starts, naming the file and key", async () => {
    const { join } = await import("node:path");
    const { mkdtempSync, existsSync } = await import("node:fs");
    const { tmpdir } = await import("node:os");
    const out = join(mkdtempSync(join(tmpdir(), "vagen-placement-")), "run");
    const child = Bun.spawn(
      ["bun", join(import.meta.dir, "../../src/cli/main.ts"), "train", join(import.meta.dir, "digit.yaml"), "model.device=cpu", "trainer.n_gpus_per_node=2", "trainer.dist_backend=nccl", `trainer.output_dir=${out}`, "--no-tui"],
      { stdout: "ignore", stderr: "pipe", env: { ...process.env, OMP_NUM_THREADS: "1" } },
    );
    const stderr = await new Response(child.stderr).text();
    expect(await child.exited).not.toBe(0);
    expect(stderr).toContain('digit.yaml: key "trainer.dist_backend": got "nccl", but model.device is cpu');
    expect(stderr.match(/trainer\.dist_backend/g)).toHaveLength(1);
    expect(stderr).not.toContain("rank 0 exited");
    expect(existsSync(out)).toBe(false);
  }, 60_000);
});
