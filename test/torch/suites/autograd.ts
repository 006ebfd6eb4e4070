import { describe, expect, test } from "bun:test";
import { analyticGradient, expectClose, finiteDifference, torch, values } from "../helpers.ts";

const { F } = torch;

export function autogradSuite(device: string): void {
  const T = (data: number[], shape: number[], dtype: torch.DType = "f32") => torch.tensor(data, shape, { dtype, device });

  describe(`autograd [${device}]`, () => {
    test("backward of a scalar gives the hand-computed matmul gradients", () => {
      torch.tidy(() => {
        const a = T([1, 2, 3, 4, 5, 6], [2, 3]).requiresGrad_();
        const b = T([7, 8, 9, 10, 11, 12], [3, 2]).requiresGrad_();
        expect(a.requiresGrad).toBe(true);
        expect(a.isLeaf).toBe(true);
        const loss = a.matmul(b).sum();
        expect(loss.hasGradFn).toBe(true);
        loss.backward();
        expect(values(a.grad!)).toEqual([15, 19, 23, 15, 19, 23]);
        expect(values(b.grad!)).toEqual([5, 5, 7, 7, 9, 9]);
        expect(T([1], [1]).grad).toBeUndefined();
      });
    });

    test("backward with a gradient tensor; gradients accumulate until cleared", () => {
      torch.tidy(() => {
        const x = T([1, 2, 3], [3]).requiresGrad_();
        const y = x.mul(x);
        y.backward(T([1, 0.5, 2], [3]), { retainGraph: true });
        expect(values(x.grad!)).toEqual([2, 2, 12]);
        y.backward(T([1, 1, 1], [3]));
        expect(values(x.grad!)).toEqual([4, 6, 18]);
        x.grad = undefined;
        expect(x.grad).toBeUndefined();
        x.mul(3).sum().backward();
        expect(values(x.grad!)).toEqual([3, 3, 3]);
        expect(() => x.mul(2).backward()).toThrow(torch.TorchError);
      });
    });

    test("gradients match finite differences across op families", () => {
      const x0 = torch.keep(torch.tensor([0.3, -1.2, 0.8, 2.0, -0.5, 1.1], [2, 3], { dtype: "f64", device }));
      const w = torch.keep(torch.tensor([0.2, -0.4, 0.9, 0.1, -0.7, 0.3], [3, 2], { dtype: "f64", device }));
      const fns: [string, (x: torch.Tensor) => torch.Tensor][] = [
        ["matmul+tanh", (x) => x.matmul(w).tanh().sum()],
        ["softmax", (x) => x.softmax(-1).mul(T([1, 2, 3, 4, 5, 6], [2, 3], "f64")).sum()],
        ["logsumexp", (x) => x.logsumexp(1).sum()],
        ["silu/gelu", (x) => F.silu(x).add(F.gelu(x, "tanh")).sum()],
        ["rmsNorm", (x) => F.rmsNorm(x, T([1, 2, 3], [3], "f64"), 1e-6).pow(2).sum()],
        ["layerNorm", (x) => F.layerNorm(x, [3]).mul(T([1, -1, 2], [3], "f64")).sum()],
        ["crossEntropy", (x) => F.crossEntropy(x, T([2, 0], [2], "i64"))],
        ["gather/where", (x) => torch.where(x.gt(0), x.exp(), x.neg()).gather(1, T([0, 2, 1, 1], [2, 2], "i64")).sum()],
        ["var/std/norm", (x) => x.var(1).sum().add(x.std()).add(x.norm())],
        ["attention", (x) => F.scaledDotProductAttention(x.reshape(1, 2, 3), x.reshape(1, 2, 3).mul(0.5), x.reshape(1, 2, 3).exp(), { isCausal: true }).sum()],
      ];
      for (const [name, f] of fns) {
        const numeric = finiteDifference(f, x0);
        const analytic = analyticGradient(f, x0);
        try {
          expectClose(analytic, numeric, 1e-5, 1e-4);
        } catch (err) {
          throw new Error(`${name}: ${(err as Error).message}`);
        }
      }
      x0.dispose();
      w.dispose();
    });

    test("noGrad, enableGrad, inferenceMode and detach stop recording", () => {
      torch.tidy(() => {
        const x = T([1, 2], [2]).requiresGrad_();
        const y = torch.noGrad(() => x.mul(2));
        expect(y.requiresGrad).toBe(false);
        expect(torch.isGradEnabled()).toBe(true);
        const z = torch.noGrad(() => torch.enableGrad(() => x.mul(2)));
        expect(z.requiresGrad).toBe(true);
        const w = torch.inferenceMode(() => {
          expect(torch.isInferenceMode()).toBe(true);
          return x.mul(2);
        });
        expect(torch.isInferenceMode()).toBe(false);
        expect(w.requiresGrad).toBe(false);
        expect(x.detach().requiresGrad).toBe(false);
        expect(() => torch.noGrad(() => Promise.resolve(1))).toThrow("synchronous");
        expect(torch.isGradEnabled()).toBe(true);
      });
    });

    test("grad() returns gradients without accumulating; createGraph gives second derivatives", () => {
      torch.tidy(() => {
        const x = T([1, 2], [2]).requiresGrad_();
        const unused = T([5], [1]).requiresGrad_();
        const y = x.pow(3).sum();
        const [gx, gu] = torch.grad(y, [x, unused], { createGraph: true });
        expect(values(gx!)).toEqual([3, 12]);
        expect(gu).toBeUndefined();
        expect(x.grad).toBeUndefined();
        const [g2] = torch.grad(gx!.sum(), [x]);
        expect(values(g2!)).toEqual([6, 12]);
        torch.backward([x.sum(), x.mul(2).sum()]);
        expect(values(x.grad!)).toEqual([3, 3]);
      });
    });

    test("checkpoint recomputes blocks in backward with identical gradients and dropout masks", () => {
      const run = (useCheckpoint: boolean) =>
        torch.tidy(() => {
          const g = new torch.Generator({ seed: 5, device });
          const w1 = torch.randn([6, 6], { generator: g, device }).requiresGrad_();
          const w2 = torch.randn([6, 6], { generator: g, device }).requiresGrad_();
          const x = torch.randn([4, 6], { generator: g, device }).requiresGrad_();
          g.dispose();
          const block = (w: torch.Tensor) => (h: torch.Tensor) => F.dropout(F.silu(h.matmul(w)), 0.3).add(h);
          torch.manualSeed(99);
          let h = x.mul(1);
          h = useCheckpoint ? torch.checkpoint(block(w1), h) : block(w1)(h);
          h = useCheckpoint ? torch.checkpoint(block(w2), h) : block(w2)(h);
          const loss = h.square().mean();
          loss.backward();
          return [loss.item(), ...values(w1.grad!), ...values(w2.grad!), ...values(x.grad!)];
        });
      const plain = run(false);
      const before = torch.liveTensors();
      const checkpointed = run(true);
      expect(torch.liveTensors()).toBe(before);
      expectClose(checkpointed, plain, 1e-5, 1e-4);
      expect(torch.pendingCheckpoints()).toBe(0);
    });

    test("checkpoints over slices of a model output: one backward, no retained graph, the plain gradients", () => {
      // h = x·w0 saves x and w0 for its backward; the blocks read two slices of it. The
      // engine stops at the blocks, and their input gradients go into h's graph in one pass.
      const run = (useCheckpoint: boolean) =>
        torch.tidy(() => {
          const g = new torch.Generator({ seed: 7, device });
          const w0 = torch.randn([5, 6], { generator: g, device }).requiresGrad_();
          const w = torch.randn([6, 6], { generator: g, device }).requiresGrad_();
          const x = torch.randn([4, 5], { generator: g, device });
          g.dispose();
          const block = (part: torch.Tensor) => F.silu(part.matmul(w)).square();
          const h = x.matmul(w0);
          const parts = [h.narrow(0, 0, 3), h.narrow(0, 3, 1)];
          const y = torch.cat(parts.map((p) => (useCheckpoint ? torch.checkpoint(block, p) : block(p))), 0);
          y.mean().backward();
          return [...values(w0.grad!), ...values(w.grad!)];
        });
      expectClose(run(true), run(false), 1e-5, 1e-4);
      expect(torch.pendingCheckpoints()).toBe(0);
    });

    test("a block input that backward also reaches directly asks for retainGraph, and works with it", () => {
      const run = (useCheckpoint: boolean, retainGraph: boolean) =>
        torch.tidy(() => {
          const w = T([1, 2, 3, 4], [2, 2]).requiresGrad_();
          const h = T([1, -1, 2, 0.5], [2, 2]).matmul(w); // saves its inputs for backward
          const block = (x: torch.Tensor) => x.square();
          const y = useCheckpoint ? torch.checkpoint(block, h) : block(h);
          y.sum().add(h.sum()).backward(undefined, { retainGraph });
          return values(w.grad!);
        });
      expect(() => run(true, false)).toThrow(/retainGraph: true/);
      expectClose(run(true, true), run(false, false), 1e-6);
      expect(torch.pendingCheckpoints()).toBe(0);
    });

    test("customGrad: a hand-written backward reaches the graph below its inputs", () => {
      torch.tidy(() => {
        // x = a·b = [3, 2]; y = x³ with backward 3x²·g; Σy: dx = [27, 12],
        // da = dx·b = [81, 12], db = dx·a = [27, 24]
        const a = T([1, 2], [2]).requiresGrad_();
        const b = T([3, 1], [2]).requiresGrad_();
        const cube = (x: torch.Tensor) => x.pow(3);
        const cubeBackward = (gy: torch.Tensor, x: torch.Tensor) => [gy.mul(x.square()).mul(3)];
        const y = torch.customGrad(cube, cubeBackward, a.mul(b));
        expect(values(y)).toEqual([27, 8]);
        y.sum().backward();
        expect(values(a.grad!)).toEqual([81, 12]);
        expect(values(b.grad!)).toEqual([27, 24]);
        expect(() => torch.customGrad(cube, () => [], a.mul(1)).sum().backward()).toThrow(/returned 0 gradients for 1 inputs/);
      });
      expect(torch.pendingCheckpoints()).toBe(0);
    });

    test("checkpoint without backward releases its block; under noGrad it just runs fn", () => {
      torch.tidy(() => {
        const w = T([1, 2, 3, 4], [2, 2]).requiresGrad_();
        const x = T([1, 1], [1, 2]).requiresGrad_();
        const y = torch.checkpoint((h) => h.matmul(w), x);
        expect(values(y)).toEqual([4, 6]);
        expect(y.requiresGrad).toBe(true);
        const z = torch.noGrad(() => torch.checkpoint((h) => h.matmul(w), x));
        expect(z.requiresGrad).toBe(false);
      });
      expect(torch.pendingCheckpoints()).toBe(0);
    });
  });
}
