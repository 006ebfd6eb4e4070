import { describe, expect, test } from "bun:test";
import { expectClose, torch, values } from "../helpers.ts";

const { cuda } = torch;

/** CUDA runtime services; needs a GPU. */
export function cudaSuite(): void {
  describe("CUDA runtime", () => {
    test("device count and properties", () => {
      expect(cuda.isAvailable()).toBe(true);
      expect(cuda.deviceCount()).toBeGreaterThan(0);
      const p = cuda.getDeviceProperties(0);
      expect(p.name.length).toBeGreaterThan(0);
      expect(p.totalMemory).toBeGreaterThan(1e9);
      expect(p.major).toBeGreaterThanOrEqual(7);
      expect(torch.torchInfo().cudaBuild).toBe(true);
    });

    test("memory stats follow allocations; emptyCache returns cached blocks", () => {
      cuda.synchronize();
      cuda.emptyCache();
      cuda.resetPeakMemoryStats(0);
      const base = cuda.memoryStats(0);
      const t = torch.empty([64, 1024, 1024], { device: "cuda" }); // 256 MiB
      const during = cuda.memoryStats(0);
      expect(during.allocated - base.allocated).toBeGreaterThanOrEqual(256 * 1024 * 1024);
      expect(during.reserved).toBeGreaterThanOrEqual(during.allocated);
      t.dispose();
      const after = cuda.memoryStats(0);
      expect(after.allocated).toBe(base.allocated);
      expect(after.peakAllocated).toBeGreaterThanOrEqual(during.allocated);
      cuda.emptyCache();
      expect(cuda.memoryStats(0).reserved).toBeLessThan(during.reserved);
    });

    test("pinned host memory: non-blocking copies to the device and back keep the values", () => {
      torch.tidy(() => {
        const host = torch.arange(1000, undefined, 1, { dtype: "i64" });
        expect(host.isPinned).toBe(false);
        const pinned = host.pinMemory();
        expect(pinned.isPinned).toBe(true);
        expect(pinned.device).toBe("cpu");
        const onDevice = pinned.to({ device: "cuda", nonBlocking: true });
        const back = onDevice.add(1).to({ device: "cpu", nonBlocking: true });
        torch.cuda.synchronize();
        expect(back.isPinned).toBe(true);
        expect(Array.from(back.toFloat32Array().subarray(0, 3))).toEqual([1, 2, 3]);
        expect(back.sum().item()).toBe((999 * 1000) / 2 + 1000);
      });
    });

    test("events time GPU work; streams run work and synchronise", () => {
      torch.tidy(() => {
        const a = torch.randn([1024, 1024], { device: "cuda" });
        const start = new cuda.Event({ enableTiming: true });
        const end = new cuda.Event({ enableTiming: true });
        start.record();
        for (let i = 0; i < 10; i++) a.matmul(a);
        end.record();
        const ms = start.elapsedTime(end);
        expect(ms).toBeGreaterThan(0);
        expect(end.query()).toBe(true);
        const s = cuda.Stream.create(0);
        const r = s.run(() => a.add(1).sum());
        s.synchronize();
        expectClose(r.item(), a.sum().item() + 1024 * 1024, 1, 1e-3);
        for (const x of [start, end, s]) x.dispose();
      });
    });

    test("CUDA graph capture and replay recompute from updated static inputs", () => {
      const input = torch.keep(torch.zeros([4, 4], { device: "cuda" }));
      const w = torch.keep(torch.eye(4, 4, { device: "cuda" }).mul(2));
      // warm up outside the capture
      torch.tidy(() => input.matmul(w).relu().add(1));
      const graph = new cuda.CUDAGraph();
      const out = graph.capture(() => torch.tidy(() => torch.keep(input.matmul(w).relu().add(1))));
      input.copy_(torch.tidy(() => torch.keep(torch.arange(16, undefined, undefined, { device: "cuda" }).float().reshape(4, 4).sub(8))));
      graph.replay();
      cuda.synchronize();
      expect(values(out)).toEqual(Array.from({ length: 16 }, (_, i) => Math.max(0, (i - 8) * 2) + 1));
      input.fill_(1);
      graph.replay();
      expect(values(out)).toEqual(new Array(16).fill(3));
      graph.dispose();
      for (const t of [input, w, out]) t.dispose();
    });

    test("manual seeds make CUDA sampling reproducible", () => {
      torch.tidy(() => {
        cuda.manualSeedAll(123);
        const a = values(torch.randn([16], { device: "cuda" }));
        cuda.manualSeedAll(123);
        expect(values(torch.randn([16], { device: "cuda" }))).toEqual(a);
      });
    });

    test("AdamW takes the fused kernel on CUDA", () => {
      const p = torch.keep(torch.ones([8], { device: "cuda" }).requiresGrad_());
      const opt = new torch.optim.AdamW([p], { lr: 0.1 });
      torch.tidy(() => p.sum().backward());
      opt.step();
      expect(opt.lastStepFused).toBe(true);
      expectClose(values(p), new Array(8).fill(1 - 0.1 * 0.01 - 0.1), 1e-5);
      opt.dispose();
      p.dispose();
    });

    test("bf16 matmul and fused attention run on the GPU", () => {
      // cuDNN attention starts disabled (see native.ts); flash / memory-efficient run.
      expect(torch.F.sdpBackends()).toEqual({ flash: true, memEfficient: true, cudnn: false, math: true });
      torch.tidy(() => {
        const q = torch.randn([2, 8, 128, 64], { device: "cuda", dtype: "bf16" });
        const fused = torch.F.scaledDotProductAttention(q, q, q, { isCausal: true });
        const math = torch.F.scaledDotProductAttention(q.float(), q.float(), q.float(), { isCausal: true, forceMath: true });
        expectClose(values(fused), values(math), 3e-2, 3e-2);
        expect(fused.dtype).toBe("bf16");
      });
    });
  });
}
