import { describe, expect, test } from "bun:test";
import { expectClose, torch, values } from "../helpers.ts";

const { F } = torch;

/** Direct-loop reference convolution over 3 spatial dims (no padding/dilation). */
function conv3dReference(x: number[], xs: number[], w: number[], ws: number[], stride: number[]): { out: number[]; shape: number[] } {
  const [n, cin, d, h, wd] = xs as [number, number, number, number, number];
  const [cout, , kd, kh, kw] = ws as [number, number, number, number, number];
  const od = Math.floor((d - kd) / stride[0]!) + 1;
  const oh = Math.floor((h - kh) / stride[1]!) + 1;
  const ow = Math.floor((wd - kw) / stride[2]!) + 1;
  const out: number[] = [];
  for (let b = 0; b < n; b++)
    for (let co = 0; co < cout; co++)
      for (let z = 0; z < od; z++)
        for (let y = 0; y < oh; y++)
          for (let xx = 0; xx < ow; xx++) {
            let s = 0;
            for (let ci = 0; ci < cin; ci++)
              for (let a = 0; a < kd; a++)
                for (let bb = 0; bb < kh; bb++)
                  for (let c = 0; c < kw; c++) {
                    const xi = ((((b * cin + ci) * d + z * stride[0]! + a) * h + y * stride[1]! + bb) * wd) + xx * stride[2]! + c;
                    const wi = (((co * cin + ci) * kd + a) * kh + bb) * kw + c;
                    s += x[xi]! * w[wi]!;
                  }
            out.push(s);
          }
  return { out, shape: [n, cout, od, oh, ow] };
}

export function nnSuite(device: string): void {
  const T = (data: number[], shape: number[], dtype: torch.DType = "f32") => torch.tensor(data, shape, { dtype, device });

  describe(`nn functions [${device}]`, () => {
    test("linear and embedding", () => {
      torch.tidy(() => {
        const x = T([1, 2], [1, 2]);
        const w = T([1, 0, 0, 1, 1, 1], [3, 2]);
        expect(values(F.linear(x, w))).toEqual([1, 2, 3]);
        expect(values(F.linear(x, w, T([0, 0, 1], [3])))).toEqual([1, 2, 4]);
        const table = T([1, 2, 3, 4, 5, 6], [3, 2]);
        const e = F.embedding(T([2, 0, 2, 1], [2, 2], "i64"), table);
        expect(e.shape).toEqual([2, 2, 2]);
        expect(values(e)).toEqual([5, 6, 1, 2, 5, 6, 3, 4]);
      });
    });

    test("activations: silu, gelu (exact and tanh), relu", () => {
      torch.tidy(() => {
        const x = T([1, -1], [2]);
        expectClose(values(F.silu(x)), [0.7310585786, -0.2689414214]);
        expectClose(values(F.gelu(x)), [0.8413447461, -0.1586552539]);
        const gt = (v: number) => 0.5 * v * (1 + Math.tanh(Math.sqrt(2 / Math.PI) * (v + 0.044715 * v ** 3)));
        expectClose(values(F.gelu(x, "tanh")), [gt(1), gt(-1)]);
        expect(values(F.relu(x))).toEqual([1, 0]);
      });
    });

    test("rmsNorm follows the float32-then-cast recipe; layerNorm and groupNorm normalise", () => {
      torch.tidy(() => {
        const x = T([1, 2, 3, 4], [1, 4]);
        const w = T([2, 2, 2, 2], [4]);
        const r = Math.sqrt(7.5 + 1e-6);
        expectClose(values(F.rmsNorm(x, w, 1e-6)), [2 / r, 4 / r, 6 / r, 8 / r]);
        const xb = x.to("bf16");
        const yb = F.rmsNorm(xb, w.to("bf16"), 1e-6);
        expect(yb.dtype).toBe("bf16");
        expectClose(values(yb), [2 / r, 4 / r, 6 / r, 8 / r], 2e-2, 1e-2);
        expectClose(values(F.rmsNorm(x, undefined, 1e-6)), [1 / r, 2 / r, 3 / r, 4 / r]);
        const sd = Math.sqrt(2 / 3 + 1e-5);
        expectClose(values(F.layerNorm(T([1, 2, 3], [1, 3]), [3])), [-1 / sd, 0, 1 / sd], 1e-5);
        expectClose(values(F.layerNorm(T([1, 2, 3], [1, 3]), [3], T([1, 1, 2], [3]), T([0, 1, 0], [3]))), [-1 / sd, 1, 2 / sd], 1e-5);
        const gn = F.groupNorm(T([1, 3, 5, 7], [1, 2, 2]), 2);
        expectClose(values(gn), [-1, 1, -1, 1], 1e-4);
      });
    });

    test("fused decoder steps: addRmsNorm, rotary and siluMul match hand-computed values", () => {
      torch.tidy(() => {
        const { sum, normed } = F.addRmsNorm(T([1, 2], [1, 2]), T([0, 2], [1, 2]), T([2, 3], [2]), 1e-6);
        const r = Math.sqrt(17 / 2 + 1e-6);
        expect(values(sum)).toEqual([1, 4]);
        expectClose(values(normed), [2 / r, 12 / r]);
        // One token, q with 2 heads, k with 1 head, headDim 4.
        const cos = T([0.5, 0.25, 1, -1], [1, 4]);
        const sin = T([1, 2, -0.5, 0.75], [1, 4]);
        const [q, k] = F.rotary(T([1, 2, 3, 4, 0, 1, 0, 1], [1, 2, 4]), T([2, 0, 0, 2], [1, 1, 4]), cos, sin);
        // out[d] = x[d] cos[d] + rotateHalf(x)[d] sin[d], rotateHalf(x1, x2) = (-x2, x1)
        expect(values(q)).toEqual([1 * 0.5 - 3 * 1, 2 * 0.25 - 4 * 2, 3 * 1 + 1 * -0.5, 4 * -1 + 2 * 0.75, 0 - 0, 0.25 - 2, 0 + 0, -1 + 0.75]);
        expect(values(k)).toEqual([1 - 0, 0 - 4, 0 - 1, -2 + 0]);
        expectClose(values(F.siluMul(T([1, -1], [2]), T([2, 3], [2]))), [2 * 0.7310585786, 3 * -0.2689414214]);
        expect(() => F.rotary(T([1, 2, 3], [1, 1, 3]), T([1, 2, 3], [1, 1, 3]), T([1, 1, 1], [1, 3]), T([1, 1, 1], [1, 3]))).toThrow("even");
        expect(() => F.addRmsNorm(T([1, 2], [1, 2]), T([1], [1, 1]), undefined)).toThrow("same shape");
      });
    });

    test("fused decoder steps equal their composites in every dtype, and stay differentiable", () => {
      const g = new torch.Generator({ seed: 11, device });
      torch.tidy(() => {
        const randn = (shape: number[], dtype: torch.DType) => torch.randn(shape, { generator: g, device }).to(dtype);
        // libtorch 1.13's CPU kernels have no float16 silu.
        const dtypes: torch.DType[] = device === "cpu" ? ["f32", "bf16"] : ["f32", "bf16", "f16"];
        // 64 takes the kernels' 16-byte vector path; 36 their element-wise path.
        for (const [dtype, hidden] of dtypes.flatMap((d) => [64, 36].map((h) => [d, h] as const))) {
          const x = randn([3, 5, hidden], dtype);
          const res = randn([3, 5, hidden], dtype);
          const w = randn([hidden], dtype);
          const q = randn([3, 5, 4, 32], dtype);
          const k = randn([3, 5, 2, 32], dtype);
          const ang = randn([3, 5, 32], "f32");
          const [c, s] = [ang.cos().to(dtype), ang.sin().to(dtype)];
          const run = () =>
            torch.noGrad(() => {
              const n = F.addRmsNorm(x, res, w, 1e-6);
              // Column slices of packed projections, as a packed qkv / gate-up GEMM gives them.
              const packed = torch.cat([q.reshape(3, 5, 128), k.reshape(3, 5, 64), x], -1);
              const qs = packed.narrow(-1, 0, 128).view(3, 5, 4, 32);
              const ks = packed.narrow(-1, 128, 64).view(3, 5, 2, 32);
              const gs = packed.narrow(-1, 192, hidden / 2);
              const us = packed.narrow(-1, 192 + hidden / 2, hidden / 2);
              return [F.rmsNorm(x, w, 1e-6), n.sum, n.normed, ...F.rotary(q, k, c, s), F.siluMul(x, res), ...F.rotary(qs, ks, c, s), F.siluMul(gs, us)].map(
                (t) => values(t.float()),
              );
            });
          const fused = run();
          const wasOn = F.fusedKernels();
          F.fusedKernels(false);
          const composite = run();
          F.fusedKernels(wasOn);
          // Only RMSNorm's float32 sum may differ in order: at most one rounding step apart.
          const tol = dtype === "f32" ? 1e-5 : dtype === "bf16" ? 1e-2 : 2e-3;
          fused.forEach((f, i) => expectClose(f, composite[i]!, i === 0 || i === 2 ? tol : 1e-6, i === 0 || i === 2 ? tol : 0));
          // Slices give what contiguous copies give.
          expect(fused[6]).toEqual(fused[3]!);
          expect(fused[7]).toEqual(fused[4]!);
        }
        // With gradients the composite path runs: d(sum of silu(a) * b)/db = silu(a).
        const a = T([0.5, -2], [2]);
        const b = T([1, 1], [2]).requiresGrad_();
        F.siluMul(a, b).sum().backward();
        expectClose(values(b.grad!), values(F.silu(a)));
        const q = T([1, 2, 3, 4], [1, 1, 4]).requiresGrad_();
        const [qr] = F.rotary(q, T([0, 0, 0, 0], [1, 1, 4]), T([1, 1, 1, 1], [1, 4]), T([0, 0, 0, 0], [1, 4]));
        qr.sum().backward();
        expect(values(q.grad!)).toEqual([1, 1, 1, 1]);
      });
      g.dispose();
    });

    test("argmaxLogprob picks the first maximum and its log-probability in one pass", () => {
      const g = new torch.Generator({ seed: 5, device });
      torch.tidy(() => {
        // Hand-computed: ties go to the first index; -inf entries count for nothing.
        const [idx, lp] = F.argmaxLogprob(T([1, 3, 3, -Infinity, 0, 2, 2, 1], [2, 4]));
        expect(values(idx)).toEqual([1, 1]);
        expectClose(values(lp), [3 - Math.log(Math.exp(1) + 2 * Math.exp(3)), 2 - Math.log(1 + 2 * Math.exp(2) + Math.exp(1))], 1e-5);
        // Against float32 log_softmax at the argmax: every dtype, packed (vocab % 8 == 0) and
        // scalar widths, and a column slice (rows further apart than their width).
        for (const dtype of ["f32", "bf16", "f16"] as const) {
          // Vocabularies past 8192 are split into parts per row on CUDA: the row maximum is
          // planted twice, in different parts, to check that the first one wins.
          for (const [V, width] of [
            [4096, 4096],
            [1001, 1001],
            [2048, 1536],
            [40000, 40000],
            [40001, 40001],
          ] as const) {
            const x = torch.randn([5, V], { generator: g, device }).mul(4).to(dtype).narrow(1, 0, width);
            if (V > 8192) {
              x.narrow(1, 100, 1).fill_(50);
              x.narrow(1, 30000, 1).fill_(50);
            }
            const [index, logprob] = F.argmaxLogprob(x);
            expect(index.dtype).toBe("i64");
            expect(logprob.dtype).toBe("f32");
            const xf = x.float();
            const ref = xf.argmax(-1);
            expect(values(index)).toEqual(values(ref));
            expectClose(values(logprob), values(xf.logSoftmax(-1).gather(1, ref.view(5, 1)).view(5)), 1e-5, 1e-5);
          }
        }
      });
      g.dispose();
    });

    test("slotDecodeAttention (with and without fused rotary) writes the new key/value and equals attention over each row's slot prefix", () => {
      const g = new torch.Generator({ seed: 3, device });
      torch.tidy(() => {
        const randn = (shape: number[], dtype: torch.DType) => torch.randn(shape, { generator: g, device }).to(dtype);
        // Positions inside the first key chunk, on the first and last key of a chunk, and at
        // the slot's end (keys are split into chunks of 64): 4 and 16 splits.
        const B = 4;
        const slots = [2, 0, 3, 1];
        const cases = [256, 1024].flatMap((slotTokens) => (["f32", "bf16", "f16"] as const).map((dtype) => [slotTokens, dtype] as const));
        for (const [slotTokens, dtype] of cases) {
          const positions = [5, 64, slotTokens - 1, 127];
          const writeIndex = torch.tensor(slots.map((s, b) => s * slotTokens + positions[b]!), [B], { dtype: "i64", device });
          // (query heads, kv heads, head dim): Qwen2.5-VL's group of 8; no grouping; a group
          // of 12, taken in two head chunks; a group of 7 with head dim 64.
          for (const [Hq, Hk, D] of [
            [16, 2, 128],
            [4, 4, 128],
            [24, 2, 128],
            [14, 2, 64],
          ] as const) {
            for (const rope of [false, true]) {
              const cacheK = randn([slots.length * slotTokens, Hk, D], dtype);
              const cacheV = randn([slots.length * slotTokens, Hk, D], dtype);
              let q: torch.Tensor, k: torch.Tensor, v: torch.Tensor;
              if (rope) {
                // q, k and v as column slices of one packed row, like the decoder's projections.
                const qkv = randn([B, 1, (Hq + 2 * Hk) * D], dtype);
                q = qkv.narrow(-1, 0, Hq * D).view(B, 1, Hq, D).transpose(1, 2);
                k = qkv.narrow(-1, Hq * D, Hk * D).view(B, 1, Hk, D).transpose(1, 2);
                v = qkv.narrow(-1, (Hq + Hk) * D, Hk * D).view(B, 1, Hk, D).transpose(1, 2);
              } else {
                // k and v one element into their packed row: new rows need no alignment.
                q = randn([B, Hq, 1, D], dtype);
                const kv = randn([B, 1, 2 * Hk * D + 1], dtype).narrow(-1, 1, 2 * Hk * D);
                k = kv.narrow(-1, 0, Hk * D).view(B, 1, Hk, D).transpose(1, 2);
                v = kv.narrow(-1, Hk * D, Hk * D).view(B, 1, Hk, D).transpose(1, 2);
              }
              // Rotary tables in the rotate-half layout: each angle twice.
              const angles = torch.rand([B, 1, D / 2], { generator: g, device }).mul(6);
              const emb = torch.cat([angles, angles], -1);
              const [cos, sin] = [emb.cos().to(dtype), emb.sin().to(dtype)];
              const [kc, vc] = [cacheK.clone(), cacheV.clone()];
              const out = torch.noGrad(() =>
                F.slotDecodeAttention(q, k, v, kc, vc, writeIndex, slotTokens, slotTokens, D ** -0.5, rope ? { cos, sin } : undefined),
              );
              if (out === undefined) {
                // Only CUDA builds with the fused kernels have it.
                expect(device === "cpu" || !F.fusedKernels()).toBe(true);
                return;
              }
              expect(out.shape).toEqual([B, Hq, 1, D]);
              // The reference: the separate rotary kernel, index_copy_ into the cache, SDPA.
              const [qr, kr] = rope
                ? F.rotary(q.transpose(1, 2), k.transpose(1, 2), cos, sin).map((t) => t.transpose(1, 2))
                : [q, k];
              const [rk, rv] = [cacheK.clone(), cacheV.clone()];
              rk.indexCopy_(0, writeIndex, kr!.reshape(B, Hk, D));
              rv.indexCopy_(0, writeIndex, v.reshape(B, Hk, D));
              // Bit-equal caches, compared on the device (they hold up to a million values).
              expect(kc.float().sub(rk.float()).abs().max().item()).toBe(0);
              expect(vc.float().sub(rv.float()).abs().max().item()).toBe(0);
              for (let b = 0; b < B; b++) {
                const window = (t: torch.Tensor) => t.narrow(0, slots[b]! * slotTokens, positions[b]! + 1).transpose(0, 1).unsqueeze(0).float();
                const ref = F.scaledDotProductAttention(qr!.narrow(0, b, 1).float(), window(rk), window(rv), { enableGqa: Hq !== Hk });
                const tol = dtype === "f32" ? 1e-4 : 2e-2;
                expectClose(values(out.narrow(0, b, 1).float()), values(ref), tol, tol);
              }
            }
          }
        }
      });
      g.dispose();
    }, 30_000); // about 50 kernel calls checked against references on the GPU

    test("conv2d and conv3d match direct loops", () => {
      torch.tidy(() => {
        const x = torch.arange(9, undefined, undefined, { device }).float().reshape(1, 1, 3, 3);
        const w = torch.ones([1, 1, 2, 2], { device });
        expect(values(F.conv2d(x, w))).toEqual([8, 12, 20, 24]);
        expect(values(F.conv2d(x, w, T([1], [1]), { stride: 2, padding: 1 }))).toEqual([1, 4, 10, 25]);
        // Qwen2.5-VL style patch embedding: temporal x spatial kernels equal to the stride
        const xs = [1, 3, 2, 4, 4];
        const ws = [5, 3, 2, 2, 2];
        const xd = Array.from({ length: 96 }, (_, i) => Math.sin(i));
        const wd = Array.from({ length: 120 }, (_, i) => Math.cos(i * 0.7));
        const ref = conv3dReference(xd, xs, wd, ws, [2, 2, 2]);
        const y = F.conv3d(T(xd, xs), T(wd, ws), undefined, { stride: [2, 2, 2] });
        expect(y.shape).toEqual(ref.shape);
        expectClose(values(y), ref.out, 1e-4, 1e-4);
        expect(() => F.conv3d(T(xd, xs), T(wd, ws), undefined, { stride: [2, 2] })).toThrow("stride needs 3 values");
      });
    });

    test("scaledDotProductAttention: plain, causal, bool and float masks, GQA, fused = math", () => {
      torch.tidy(() => {
        const q = T([1, 0], [1, 1, 2, 1]);
        const v = T([1, 2], [1, 1, 2, 1]);
        const e = Math.E;
        expectClose(values(F.scaledDotProductAttention(q, q, v, { scale: 1 })), [(e + 2) / (e + 1), 1.5]);
        expectClose(values(F.scaledDotProductAttention(q, q, v, { scale: 1, isCausal: true })), [1, 1.5]);
        const boolMask = T([1, 0, 1, 1], [2, 2], "bool");
        expectClose(values(F.scaledDotProductAttention(q, q, v, { scale: 1, attnMask: boolMask })), [1, 1.5]);
        const floatMask = T([0, -Infinity, 0, 0], [2, 2]);
        expectClose(values(F.scaledDotProductAttention(q, q, v, { scale: 1, attnMask: floatMask })), [1, 1.5]);

        const g = new torch.Generator({ seed: 3, device });
        const qq = torch.randn([2, 4, 5, 8], { generator: g, device });
        const kk = torch.randn([2, 2, 7, 8], { generator: g, device });
        const vv = torch.randn([2, 2, 7, 8], { generator: g, device });
        const gqa = F.scaledDotProductAttention(qq, kk, vv, { enableGqa: true });
        const repeated = F.scaledDotProductAttention(qq, kk.repeatInterleave(2, 1), vv.repeatInterleave(2, 1));
        expectClose(values(gqa), values(repeated), 1e-5, 1e-4);
        // manual reference: softmax(q k^T / sqrt(E)) v
        const k4 = kk.repeatInterleave(2, 1);
        const manual = qq.matmul(k4.mT()).mul(1 / Math.sqrt(8)).softmax(-1).matmul(vv.repeatInterleave(2, 1));
        expectClose(values(repeated), values(manual), 1e-5, 1e-4);
        const causalFused = F.scaledDotProductAttention(qq, k4.narrow(2, 0, 5), vv.repeatInterleave(2, 1).narrow(2, 0, 5), { isCausal: true });
        const causalMath = F.scaledDotProductAttention(qq, k4.narrow(2, 0, 5), vv.repeatInterleave(2, 1).narrow(2, 0, 5), { isCausal: true, forceMath: true });
        expectClose(values(causalFused), values(causalMath), 1e-5, 1e-4);
        g.dispose();
      });
    });

    test("dropout: identity when not training or p = 0, scaled Bernoulli mask otherwise", () => {
      torch.tidy(() => {
        const x = torch.ones([4000], { device });
        expect(values(F.dropout(x, 0.5, false))).toEqual(values(x));
        expect(values(F.dropout(x, 0))).toEqual(values(x));
        torch.manualSeed(11);
        const y = values(F.dropout(x, 0.5));
        for (const v of y) expect(v === 0 || v === 2).toBe(true);
        const kept = y.filter((v) => v === 2).length;
        expect(kept).toBeGreaterThan(1800);
        expect(kept).toBeLessThan(2200);
        torch.manualSeed(11);
        expect(values(F.dropout(x, 0.5))).toEqual(y);
      });
    });

    test("crossEntropy: mean, sum, none, ignoreIndex, label smoothing", () => {
      torch.tidy(() => {
        const logits = T([1, 2, 3, 1, 1, 1], [2, 3]);
        const lz = Math.log(Math.exp(1) + Math.exp(2) + Math.exp(3));
        const l0 = lz - 3;
        const l1 = Math.log(3);
        const target = T([2, 0], [2], "i64");
        expectClose(F.crossEntropy(logits, target).item(), (l0 + l1) / 2);
        expectClose(F.crossEntropy(logits, target, { reduction: "sum" }).item(), l0 + l1);
        expectClose(values(F.crossEntropy(logits, target, { reduction: "none" })), [l0, l1]);
        expectClose(F.crossEntropy(logits, T([2, -100], [2], "i64")).item(), l0);
        // smoothing 0.3 over 3 classes: target weight 0.8, others 0.1
        const lp = [1 - lz, 2 - lz, 3 - lz];
        const smooth0 = -(0.1 * lp[0]! + 0.1 * lp[1]! + 0.8 * lp[2]!);
        expectClose(values(F.crossEntropy(logits, target, { reduction: "none", labelSmoothing: 0.3 }))[0]!, smooth0);
      });
    });

    test("pad and interpolate", () => {
      torch.tidy(() => {
        const x = T([1, 2], [1, 1, 2]);
        expect(values(F.pad(x, [1, 2]))).toEqual([0, 1, 2, 0, 0]);
        expect(values(F.pad(x, [1, 0], "constant", 9))).toEqual([9, 1, 2]);
        const img = T([1, 2, 3, 4], [1, 1, 2, 2]);
        expect(values(F.interpolate(img, [4, 4], "nearest"))).toEqual([1, 1, 2, 2, 1, 1, 2, 2, 3, 3, 4, 4, 3, 3, 4, 4]);
        expectClose(values(F.interpolate(img, [1, 1], "bilinear")), [2.5]);
      });
    });
  });
}
