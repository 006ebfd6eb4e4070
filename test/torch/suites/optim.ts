import { describe, expect, test } from "bun:test";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { expectClose, torch, values } from "../helpers.ts";

const { optim } = torch;

/** Plain-JS AdamW (torch.optim.AdamW's update rule) for a fixed gradient per step. */
function adamwReference(p: number[], grads: number[][], lr: number, b1: number, b2: number, eps: number, wd: number): number[] {
  const m = p.map(() => 0);
  const v = p.map(() => 0);
  const x = p.slice();
  grads.forEach((g, s) => {
    const step = s + 1;
    for (let i = 0; i < x.length; i++) {
      x[i]! *= 1 - lr * wd;
      m[i] = b1 * m[i]! + (1 - b1) * g[i]!;
      v[i] = b2 * v[i]! + (1 - b2) * g[i]! ** 2;
      const denom = Math.sqrt(v[i]!) / Math.sqrt(1 - b2 ** step) + eps;
      x[i]! -= (lr / (1 - b1 ** step)) * (m[i]! / denom);
    }
  });
  return x;
}

export function optimSuite(device: string): void {
  const T = (data: number[], shape: number[]) => torch.tensor(data, shape, { device });

  /** Sets p.grad to g (through backward of sum(p * g)). */
  const setGrad = (p: torch.Tensor, g: number[]) =>
    torch.tidy(() => {
      p.grad = undefined;
      p.mul(T(g, p.shape)).sum().backward();
    });

  describe(`optimizers and schedules [${device}]`, () => {
    test("AdamW matches the reference update over several steps, fused or foreach", () => {
      const grads = [[0.5, -1, 2], [0.1, 0.3, -0.2], [-1, 1, 0.5]];
      const expected = adamwReference([1, 2, -1], grads, 0.1, 0.9, 0.999, 1e-8, 0.01);
      for (const fused of ["auto", false] as const) {
        const p = torch.keep(T([1, 2, -1], [3]).requiresGrad_());
        const opt = new optim.AdamW([p], { lr: 0.1, fused });
        for (const g of grads) {
          setGrad(p, g);
          opt.step();
        }
        expectClose(values(p), expected, 1e-5, 1e-5);
        expect(opt.stepCount).toBe(3);
        opt.dispose();
        p.dispose();
      }
    });

    test("AdamW by hand: two f32 steps", () => {
      // lr 0.1, wd 0.01, betas (0.9, 0.999). Step 1, g = [0.5, 0.1]: m̂ = g, v̂ = g², so the
      // update is sign(g): p = [1, -2]·(1 − 0.001) − 0.1 = [0.899, −2.098].
      // Step 2, g = [−0.5, 0.1]: m₀ = 0.9·0.05 − 0.05 = −0.005, v₀ = 0.999·0.00025 + 0.00025
      // = 0.00049975; m̂ = −0.005/0.19, v̂ = 0.00049975/0.001999 = 0.25, √v̂ = 0.5;
      // p₀ = 0.899·0.999 + 0.1·(0.005/0.19)/0.5 = 0.898101 + 0.00526315… = 0.90336415…
      // m₁ = 0.9·0.01 + 0.01 = 0.019, m̂ = 0.1, v̂ = 0.01, update 1: p₁ = −2.098·0.999 − 0.1 = −2.195902
      const p = torch.keep(T([1, -2], [2]).requiresGrad_());
      const opt = new optim.AdamW([p], { lr: 0.1, weightDecay: 0.01 });
      setGrad(p, [0.5, 0.1]);
      opt.step();
      expectClose(values(p), [0.899, -2.098], 1e-6, 0);
      setGrad(p, [-0.5, 0.1]);
      opt.step();
      expectClose(values(p), [0.898101 + 0.1 * (0.005 / 0.19) / 0.5, -2.195902], 1e-6, 0);
      expect(opt.paramSteps()).toEqual([2]);
      opt.dispose();
      p.dispose();
    });

    test("AdamW counts steps per parameter: one without a gradient keeps its count and value", () => {
      const a = torch.keep(T([1, 2], [2]).requiresGrad_());
      const b = torch.keep(T([-1], [1]).requiresGrad_());
      const opt = new optim.AdamW([a, b], { lr: 0.1 });
      setGrad(a, [0.5, -1]);
      setGrad(b, [2]);
      opt.step();
      setGrad(a, [0.1, 0.3]);
      b.grad = undefined;
      opt.step();
      const afterSkip = values(b);
      expect(opt.paramSteps()).toEqual([2, 1]);
      setGrad(a, [-1, 1]);
      setGrad(b, [0.5]);
      opt.step();
      expect(opt.paramSteps()).toEqual([3, 2]);
      expectClose(afterSkip, adamwReference([-1], [[2]], 0.1, 0.9, 0.999, 1e-8, 0.01));
      // b's second update uses step 2's bias correction, not the optimizer's third step
      expectClose(values(b), adamwReference([-1], [[2], [0.5]], 0.1, 0.9, 0.999, 1e-8, 0.01));
      expectClose(values(a), adamwReference([1, 2], [[0.5, -1], [0.1, 0.3], [-1, 1]], 0.1, 0.9, 0.999, 1e-8, 0.01));
      opt.dispose();
      for (const t of [a, b]) t.dispose();
    });

    test("AdamW with bf16 parameters keeps f32 moments and master weights that track a float64 reference", () => {
      // lr 1e-3 on values near 1: each update is below half a bf16 step (2⁻⁸), so a bf16
      // parameter updated in place never moves; the f32 master accumulates them and the
      // written parameter is the reference rounded to bf16.
      const init = [1, -0.75, 0.625, 1.25];
      // gradients of one sign per parameter, so the 20 updates add up to ~0.02, a few bf16 steps
      const grads = Array.from({ length: 20 }, (_, s) => init.map((_, i) => (i % 2 === 0 ? 1 : -1) * (0.3 + 0.1 * Math.sin(1 + s * 4 + i))));
      const run = (f32State: boolean) => {
        const p = torch.keep(torch.tensor(init, [4], { dtype: "bf16", device }).requiresGrad_());
        const opt = new optim.AdamW([p], { lr: 1e-3, weightDecay: 0.01, f32State });
        const applied: number[][] = [];
        for (const g of grads) {
          setGrad(p, g);
          applied.push(values(p.grad!)); // the bf16-rounded gradient the step sees
          opt.step();
        }
        const state = opt.stateDict();
        const dtypes = [state.tensors["0.0.exp_avg"]!.dtype, state.tensors["0.0.master"]?.dtype];
        const out = { param: values(p), dtype: p.dtype, applied, dtypes };
        opt.dispose();
        p.dispose();
        return out;
      };
      const mixed = run(true);
      expect(mixed.dtype).toBe("bf16");
      expect(mixed.dtypes).toEqual(["f32", "f32"]);
      const reference = adamwReference(init, mixed.applied, 1e-3, 0.9, 0.999, 1e-8, 0.01);
      reference.forEach((r, i) => {
        // within bf16 rounding of the written value (half a bf16 step at r: 8 bits of
        // mantissa) plus f32 noise
        const halfStep = 2 ** (Math.floor(Math.log2(Math.abs(r))) - 8);
        expect(Math.abs(mixed.param[i]! - r)).toBeLessThanOrEqual(halfStep + 1e-6);
        expect(Math.abs(mixed.param[i]! - init[i]!)).toBeGreaterThan(0); // it moved
      });
      const plain = run(false);
      expect(plain.dtypes[0]).toBe("bf16");
      expect(plain.dtypes[1]).toBeUndefined();
      expect(plain.param).toEqual(init); // every bf16 update rounded away
    });

    test("AdamW mixed-precision state saves and resumes exactly; an old shared-step state still loads", () => {
      const grads = [[0.5, -1], [0.2, 0.1], [-0.3, 0.4]];
      const bf16 = (data: number[]) => torch.tensor(data, [2], { dtype: "bf16", device });
      const p = torch.keep(bf16([1, 2]).requiresGrad_());
      const opt = new optim.AdamW([p], { lr: 1e-3 });
      setGrad(p, grads[0]!);
      opt.step();
      const state = opt.stateDict();
      expect(JSON.parse(state.metadata.steps!)).toEqual([[1]]);
      const q = torch.keep(p.detach().clone().requiresGrad_());
      const resumed = new optim.AdamW([q], { lr: 1e-3 });
      resumed.loadStateDict(state);
      for (const g of grads.slice(1)) {
        for (const [t, o] of [[p, opt], [q, resumed]] as const) {
          setGrad(t, g);
          o.step();
        }
      }
      expect(values(q)).toEqual(values(p));
      expect(values(resumed.stateDict().tensors["0.0.master"]!)).toEqual(values(opt.stateDict().tensors["0.0.master"]!));

      // the layout before per-parameter counts: one "step", bf16 moments, no master
      const old = new optim.AdamW([q], { lr: 1e-3, f32State: false });
      setGrad(q, grads[0]!);
      old.step();
      const oldState = old.stateDict();
      delete oldState.metadata.steps;
      const upgraded = new optim.AdamW([q], { lr: 1e-3 });
      upgraded.loadStateDict(oldState);
      expect(upgraded.paramSteps()).toEqual([1]);
      expect(values(upgraded.stateDict().tensors["0.0.exp_avg"]!)).toEqual(values(oldState.tensors["0.0.exp_avg"]!));
      expect(upgraded.stateDict().tensors["0.0.master"]).toBeUndefined();
      for (const o of [opt, resumed, old, upgraded]) o.dispose();
      for (const t of [p, q]) t.dispose();
    });

    test("offloaded AdamW keeps its state in host memory and steps as the in-device one; checkpoints cross", () => {
      // three parameters: f32, bf16 (through an f32 master) and one left without a gradient
      // at step 2; a chunk of 3 elements puts each parameter in an FFI call of its own
      const init = { a: [1, 2, -1], b: [0.5, -0.25, 1.5, 2], c: [3] };
      const grads = [
        { a: [0.5, -1, 2], b: [0.1, 0.2, -0.3, 0.4], c: [1] },
        { a: [0.1, 0.3, -0.2], b: [-0.2, 0.1, 0.3, -0.1], c: undefined },
        { a: [-1, 1, 0.5], b: [0.3, -0.3, 0.2, 0.1], c: [-0.5] },
      ];
      const make = () => [
        torch.keep(T(init.a, [3]).requiresGrad_()),
        torch.keep(torch.tensor(init.b, [2, 2], { dtype: "bf16", device }).requiresGrad_()),
        torch.keep(T(init.c, [1]).requiresGrad_()),
      ];
      const stepAll = (ps: torch.Tensor[], opt: InstanceType<typeof optim.AdamW>, g: (typeof grads)[number]) => {
        setGrad(ps[0]!, g.a);
        setGrad(ps[1]!, g.b);
        if (g.c) setGrad(ps[2]!, g.c);
        else ps[2]!.grad = undefined;
        opt.step();
      };
      const plainParams = make();
      const plain = new optim.AdamW(plainParams, { lr: 0.01 });
      const offParams = make();
      const off = new optim.AdamW(offParams, { lr: 0.01, offload: true, offloadChunkElements: 3 });
      for (const g of grads.slice(0, 2)) {
        stepAll(plainParams, plain, g);
        stepAll(offParams, off, g);
      }
      const state = off.stateDict();
      // the in-device layout: moments for all, a master for the bf16 parameter only, in host memory
      expect(Object.keys(state.tensors).sort()).toEqual(Object.keys(plain.stateDict().tensors).sort());
      expect(Object.values(state.tensors).map((t) => t.device)).toEqual(Object.values(state.tensors).map(() => "cpu"));
      expect(state.tensors["0.1.master"]!.dtype).toBe("f32");
      expect(off.paramSteps()).toEqual([2, 2, 1]);
      expect(offParams[1]!.dtype).toBe("bf16");
      expect(offParams.map((p) => p.device)).toEqual(offParams.map(() => plainParams[0]!.device));
      // on the CPU the same kernels run on the same values: bit-equal; on a GPU the host
      // kernel rounds as it does, so to f32 noise
      const same = (x: number[], y: number[]) => (device === "cpu" ? expect(x).toEqual(y) : expectClose(x, y, 1e-6, 1e-6));
      plainParams.forEach((p, i) => same(values(offParams[i]!), values(p)));
      same(values(state.tensors["0.1.master"]!), values(plain.stateDict().tensors["0.1.master"]!));

      // an offloaded checkpoint resumes in-device and the other way, as if never interrupted
      const fromOff = make();
      const fromPlain = make();
      fromOff.forEach((p, i) => torch.noGrad(() => p.copy_(offParams[i]!)));
      fromPlain.forEach((p, i) => torch.noGrad(() => p.copy_(plainParams[i]!)));
      const inDevice = new optim.AdamW(fromOff, { lr: 0.01 });
      inDevice.loadStateDict(state);
      const offloaded = new optim.AdamW(fromPlain, { lr: 0.01, offload: true });
      offloaded.loadStateDict(plain.stateDict());
      stepAll(plainParams, plain, grads[2]!);
      stepAll(offParams, off, grads[2]!);
      stepAll(fromOff, inDevice, grads[2]!);
      stepAll(fromPlain, offloaded, grads[2]!);
      plainParams.forEach((p, i) => {
        same(values(fromPlain[i]!), values(p));
        same(values(fromOff[i]!), values(offParams[i]!));
        same(values(offParams[i]!), values(p));
      });
      expect(offloaded.paramSteps()).toEqual([3, 3, 2]);
      for (const o of [plain, off, inDevice, offloaded]) o.dispose();
      for (const p of [...plainParams, ...offParams, ...fromOff, ...fromPlain]) p.dispose();
    });

    test("parameter groups carry their own lr and weight decay; params without grad are skipped", () => {
      const a = torch.keep(T([1], [1]).requiresGrad_());
      const b = torch.keep(T([1], [1]).requiresGrad_());
      const frozen = torch.keep(T([5], [1]).requiresGrad_());
      const opt = new optim.AdamW([{ params: [a] }, { params: [b, frozen], lr: 0.01, weightDecay: 0 }], { lr: 0.1 });
      setGrad(a, [1]);
      setGrad(b, [1]);
      opt.step();
      expectClose(values(a), adamwReference([1], [[1]], 0.1, 0.9, 0.999, 1e-8, 0.01));
      expectClose(values(b), adamwReference([1], [[1]], 0.01, 0.9, 0.999, 1e-8, 0));
      expect(values(frozen)).toEqual([5]);
      opt.zeroGrad();
      expect(a.grad).toBeUndefined();
      opt.dispose();
      for (const t of [a, b, frozen]) t.dispose();
    });

    test("SGD with momentum, Nesterov and weight decay follows torch.optim.SGD", () => {
      const p = torch.keep(T([1, -2], [2]).requiresGrad_());
      const opt = new optim.SGD([p], { lr: 0.1, momentum: 0.9, weightDecay: 0.1 });
      // reference
      let x = [1, -2];
      let buf: number[] | undefined;
      for (const g of [[1, 1], [0.5, -1], [2, 0]]) {
        setGrad(p, g);
        opt.step();
        const d = g.map((gi, i) => gi + 0.1 * x[i]!);
        buf = buf === undefined ? d : buf.map((bi, i) => 0.9 * bi + d[i]!);
        x = x.map((xi, i) => xi - 0.1 * buf![i]!);
      }
      expectClose(values(p), x, 1e-6);
      opt.dispose();
      p.dispose();
      const q = torch.keep(T([1], [1]).requiresGrad_());
      const nesterov = new optim.SGD([q], { lr: 0.1, momentum: 0.5, nesterov: true });
      setGrad(q, [2]);
      nesterov.step(); // buf = 2, update = 2 + 0.5 * 2 = 3
      expectClose(values(q), [0.7], 1e-6);
      nesterov.dispose();
      q.dispose();
    });

    test("clipGradNorm scales gradients to the max norm and returns the original norm", () => {
      torch.tidy(() => {
        const a = T([0, 0], [2]).requiresGrad_();
        const b = T([0], [1]).requiresGrad_();
        setGrad(a, [3, 0]);
        setGrad(b, [4]);
        const norm = optim.clipGradNorm([a, b], 1);
        expectClose(norm.item(), 5, 1e-5);
        expectClose(values(a.grad!), [0.6, 0], 1e-5);
        expectClose(values(b.grad!), [0.8], 1e-5);
        // under the limit: untouched
        const n2 = optim.clipGradNorm([a, b], 10);
        expectClose(n2.item(), 1, 1e-5);
        expectClose(values(b.grad!), [0.8], 1e-5);
      });
    });

    test("constant and warmup-cosine schedules drive the optimizer's lr", () => {
      const warm = optim.constantSchedule({ warmupSteps: 4 });
      expect([0, 2, 4, 100].map(warm)).toEqual([0, 0.5, 1, 1]);
      const cos = optim.warmupCosineSchedule({ warmupSteps: 10, totalSteps: 110, minLrRatio: 0.1 });
      expectClose([0, 5, 10, 60, 110, 200].map(cos), [0, 0.5, 1, 0.55, 0.1, 0.1], 1e-9);
      const p = torch.keep(T([1], [1]).requiresGrad_());
      const opt = new optim.SGD([p], { lr: 0.2 });
      const sched = new optim.LRScheduler(opt, warm);
      expect(opt.lr).toBe(0);
      sched.step();
      sched.step();
      expectClose(opt.lr, 0.1, 1e-12);
      sched.setStep(50);
      expectClose(opt.lr, 0.2, 1e-12);
      opt.dispose();
      p.dispose();
    });

    test("optimizer state saves to safetensors and resumes exactly", () => {
      const dir = mkdtempSync(join(tmpdir(), "vagen-optim-"));
      try {
        const grads = [[0.5, -1], [0.2, 0.1], [-0.3, 0.4]];
        const p = torch.keep(T([1, 2], [2]).requiresGrad_());
        const opt = new optim.AdamW([p], { lr: 0.05 });
        setGrad(p, grads[0]!);
        opt.step();
        const state = opt.stateDict();
        torch.safetensors.save(join(dir, "optim.safetensors"), state.tensors, state.metadata);
        const snapshot = torch.keep(p.detach().clone());
        setGrad(p, grads[1]!);
        opt.step();
        const continued = values(p);

        const q = torch.keep(snapshot.clone().requiresGrad_());
        const resumed = new optim.AdamW([q], { lr: 0.05 });
        const loaded = torch.safetensors.load(join(dir, "optim.safetensors"));
        const { metadata } = torch.safetensors.readHeader(join(dir, "optim.safetensors"));
        resumed.loadStateDict({ tensors: loaded, metadata });
        for (const t of loaded.values()) t.dispose();
        expect(resumed.stepCount).toBe(1);
        setGrad(q, grads[1]!);
        resumed.step();
        expectClose(values(q), continued, 1e-7);
        expect(() => new optim.SGD([q]).loadStateDict({ tensors: new Map(), metadata })).toThrow(/not SGD/);
        for (const t of [p, q, snapshot]) t.dispose();
        opt.dispose();
        resumed.dispose();
      } finally {
        rmSync(dir, { recursive: true, force: true });
      }
    });
  });
}
