import { describe, expect, test } from "bun:test";
import { expectClose, torch, values } from "../helpers.ts";

export function opsSuite(device: string): void {
  const T = (data: number[], shape: number[], dtype: torch.DType = "f32") => torch.tensor(data, shape, { dtype, device });

  describe(`tensor ops [${device}]`, () => {
    test("elementwise arithmetic with tensors and scalars, broadcasting", () => {
      torch.tidy(() => {
        const a = T([1, 2, 3, 4], [2, 2]);
        const b = T([10, 20], [2]);
        expect(values(a.add(b))).toEqual([11, 22, 13, 24]);
        expect(values(a.add(b, 2))).toEqual([21, 42, 23, 44]);
        expect(values(a.sub(1))).toEqual([0, 1, 2, 3]);
        expect(values(a.mul(b))).toEqual([10, 40, 30, 80]);
        expect(values(a.div(2))).toEqual([0.5, 1, 1.5, 2]);
        expect(values(a.pow(2))).toEqual([1, 4, 9, 16]);
        expect(values(a.rsub(10))).toEqual([9, 8, 7, 6]);
        expect(values(a.rdiv(12))).toEqual([12, 6, 4, 3]);
        expect(values(a.neg().abs())).toEqual([1, 2, 3, 4]);
        expectClose(values(a.exp().log()), [1, 2, 3, 4], 1e-5);
        expectClose(values(a.sqrt()), [1, Math.SQRT2, Math.sqrt(3), 2]);
        expectClose(values(a.rsqrt()), [1, 1 / Math.SQRT2, 1 / Math.sqrt(3), 0.5]);
        expectClose(values(a.sigmoid()), [1, 2, 3, 4].map((x) => 1 / (1 + Math.exp(-x))));
        expectClose(values(a.tanh()), [1, 2, 3, 4].map(Math.tanh));
        expectClose(values(a.sin()), [1, 2, 3, 4].map(Math.sin));
        expect(values(a.remainder(3))).toEqual([1, 2, 0, 1]);
        expect(values(a.maximum(2.5))).toEqual([2.5, 2.5, 3, 4]);
        expect(values(a.clamp(2, 3))).toEqual([2, 2, 3, 3]);
        expect(values(a.clampMin(3))).toEqual([3, 3, 3, 4]);
        // integer tensors stay integral with integral scalars, true division promotes
        const i = T([7, -7], [2], "i64");
        expect(i.add(1).dtype).toBe("i64");
        expect(values(i.div(2))).toEqual([3.5, -3.5]);
        expect(values(i.floorDivide(2))).toEqual([3, -4]);
        // ... and with integer tensors, in place too (a whole alpha is an integer)
        const j = T([2 ** 40, 5], [2], "i64");
        expect(values(i.add(j))).toEqual([2 ** 40 + 7, -2]);
        expect(values(i.sub(j, 2))).toEqual([7 - 2 ** 41, -17]);
        expect(values(j.clone().add_(i))).toEqual([2 ** 40 + 7, -2]);
        expect(i.add(j).dtype).toBe("i64");
        expect(values(a.add(b, 0.5))).toEqual([6, 12, 8, 14]);
      });
    });

    test("comparisons, logic and where", () => {
      torch.tidy(() => {
        const a = T([1, 2, 3], [3]);
        const b = T([3, 2, 1], [3]);
        expect(values(a.lt(b))).toEqual([1, 0, 0]);
        expect(values(a.ge(2))).toEqual([0, 1, 1]);
        expect(values(a.eq(b))).toEqual([0, 1, 0]);
        expect(a.ne(b).dtype).toBe("bool");
        expect(values(a.gt(1).logicalAnd(a.lt(3)))).toEqual([0, 1, 0]);
        expect(values(torch.where(a.gt(1), a, b))).toEqual([3, 2, 3]);
        expect(values(torch.where(a.gt(1), a, 0))).toEqual([0, 2, 3]);
        expect(a.equal(T([1, 2, 3], [3]))).toBe(true);
        expect(a.equal(b)).toBe(false);
        expect(values(T([NaN, 1], [2]).isnan())).toEqual([1, 0]);
      });
    });

    test("matmul, bmm, baddbmm, addmm, dot, outer", () => {
      torch.tidy(() => {
        const a = T([1, 2, 3, 4, 5, 6], [2, 3]);
        const b = T([7, 8, 9, 10, 11, 12], [3, 2]);
        expect(values(a.matmul(b))).toEqual([58, 64, 139, 154]);
        const ba = a.unsqueeze(0).expand(2, 2, 3);
        const bb = b.unsqueeze(0).expand(2, 3, 2);
        expect(values(ba.bmm(bb))).toEqual([58, 64, 139, 154, 58, 64, 139, 154]);
        const c = torch.ones([2, 2, 2], { device });
        expect(values(c.baddbmm(ba, bb, { beta: 2, alpha: 0.5 }))).toEqual([31, 34, 71.5, 79, 31, 34, 71.5, 79]);
        expect(values(torch.ones([2, 2], { device }).addmm(a, b))).toEqual([59, 65, 140, 155]);
        expect(T([1, 2, 3], [3]).dot(T([4, 5, 6], [3])).item()).toBe(32);
        expect(values(T([1, 2], [2]).outer(T([3, 4], [2])))).toEqual([3, 4, 6, 8]);
        // matmul broadcasts a vector
        expect(values(a.matmul(T([1, 1, 1], [3])))).toEqual([6, 15]);
      });
    });

    test("reductions over dims with keepdim", () => {
      torch.tidy(() => {
        const a = T([1, 2, 3, 4, 5, 6], [2, 3]);
        expect(a.sum().item()).toBe(21);
        expect(values(a.sum(0))).toEqual([5, 7, 9]);
        expect(a.sum(1, true).shape).toEqual([2, 1]);
        expect(values(a.sum([0, 1]))).toEqual([21]);
        expect(values(a.mean(1))).toEqual([2, 5]);
        expect(a.max().item()).toBe(6);
        const m = a.max(1);
        expect(values(m.values)).toEqual([3, 6]);
        expect(values(m.indices)).toEqual([2, 2]);
        expect(m.indices.dtype).toBe("i64");
        const mn = a.min(0, true);
        expect(mn.values.shape).toEqual([1, 3]);
        expect(values(mn.values)).toEqual([1, 2, 3]);
        expect(values(a.argmax(1))).toEqual([2, 2]);
        expect(a.argmax().item()).toBe(5);
        expect(values(a.amax(0))).toEqual([4, 5, 6]);
        expectClose(values(a.logsumexp(1)), [Math.log(Math.exp(1) + Math.exp(2) + Math.exp(3)), Math.log(Math.exp(4) + Math.exp(5) + Math.exp(6))]);
        expect(values(a.cumsum(1))).toEqual([1, 3, 6, 4, 9, 15]);
        expect(values(a.prod(1))).toEqual([6, 120]);
        expectClose(values(a.var(1)), [1, 1]);
        expectClose(values(a.var(1, { unbiased: false })), [2 / 3, 2 / 3]);
        expectClose(a.std().item(), Math.sqrt(3.5));
        expectClose(a.norm().item(), Math.sqrt(91));
        expectClose(values(a.norm(1, 1)), [6, 15]);
        const vm = a.varMean(1);
        expectClose(values(vm.mean), [2, 5]);
        expect(values(a.gt(2).any(1))).toEqual([1, 1]);
        expect(values(a.gt(2).all(1))).toEqual([0, 1]);
        expect(values(a.gt(2).countNonzero())).toEqual([4]);
        expect(values(a.sum(1, false, { dtype: "f64" }))).toEqual([6, 15]);
      });
    });

    test("softmax and logSoftmax along a dim", () => {
      torch.tidy(() => {
        const x = T([1, 2, 3, 1, 1, 1], [2, 3]);
        const z = Math.exp(1) + Math.exp(2) + Math.exp(3);
        expectClose(values(x.softmax(-1)), [Math.exp(1) / z, Math.exp(2) / z, Math.exp(3) / z, 1 / 3, 1 / 3, 1 / 3]);
        expectClose(values(x.logSoftmax(1)), [1 - Math.log(z), 2 - Math.log(z), 3 - Math.log(z), -Math.log(3), -Math.log(3), -Math.log(3)]);
        expect(x.softmax(-1, { dtype: "f64" }).dtype).toBe("f64");
      });
    });

    test("views: reshape, view, permute, transpose, narrow, slice, select, squeeze, expand, flip, roll, tril, triu", () => {
      torch.tidy(() => {
        const a = torch.arange(6, undefined, undefined, { device }).float();
        const m = a.reshape(2, 3);
        expect(m.shape).toEqual([2, 3]);
        expect(a.view([3, 2]).shape).toEqual([3, 2]);
        expect(a.reshape(-1, 2).shape).toEqual([3, 2]);
        expect(values(m.transpose(0, 1))).toEqual([0, 3, 1, 4, 2, 5]);
        expect(m.transpose(0, 1).isContiguous()).toBe(false);
        expect(m.transpose(0, 1).contiguous().isContiguous()).toBe(true);
        expect(values(m.t())).toEqual([0, 3, 1, 4, 2, 5]);
        const p = torch.arange(24, undefined, undefined, { device }).reshape(2, 3, 4).permute(2, 0, 1);
        expect(p.shape).toEqual([4, 2, 3]);
        expect(values(p.select(0, 1))).toEqual([1, 5, 9, 13, 17, 21]);
        expect(values(m.narrow(1, 1, 2))).toEqual([1, 2, 4, 5]);
        expect(values(a.slice(0, 1, 5, 2))).toEqual([1, 3]);
        expect(values(a.slice(0, -2))).toEqual([4, 5]);
        expect(values(m.slices([[0, 1, undefined], [1, 0, 2]]))).toEqual([3, 4]);
        expect(m.unsqueeze(0).shape).toEqual([1, 2, 3]);
        expect(m.unsqueeze(-1).squeeze(-1).shape).toEqual([2, 3]);
        expect(torch.zeros([1, 2, 1], { device }).squeeze().shape).toEqual([2]);
        expect(T([1, 2], [2, 1]).expand(2, 3).shape).toEqual([2, 3]);
        expect(values(T([1, 2], [2, 1]).expand(-1, 2))).toEqual([1, 1, 2, 2]);
        expect(values(m.flip(1))).toEqual([2, 1, 0, 5, 4, 3]);
        expect(values(a.roll(2, 0))).toEqual([4, 5, 0, 1, 2, 3]);
        const ones = torch.ones([3, 3], { device });
        expect(values(ones.tril())).toEqual([1, 0, 0, 1, 1, 0, 1, 1, 1]);
        expect(values(ones.triu(1))).toEqual([0, 1, 1, 0, 0, 1, 0, 0, 0]);
        expect(m.flatten().shape).toEqual([6]);
        expect(torch.zeros([2, 3, 4], { device }).flatten(1).shape).toEqual([2, 12]);
        expect(a.unflatten(0, [2, -1]).shape).toEqual([2, 3]);
        expect(values(T([1, 2], [2]).repeat(2))).toEqual([1, 2, 1, 2]);
        expect(values(T([1, 2], [2]).repeatInterleave(2, 0))).toEqual([1, 1, 2, 2]);
        expect(m.movedim(0, 1).shape).toEqual([3, 2]);
        expect(m.size(-1)).toBe(3);
        expect(m.numel()).toBe(6);
        expect(m.stride()).toEqual([3, 1]);
        expect(m.transpose(0, 1).isAliasOf(m)).toBe(true);
      });
    });

    test("cat, stack, split, chunk, unbind", () => {
      torch.tidy(() => {
        const a = T([1, 2], [1, 2]);
        const b = T([3, 4], [1, 2]);
        expect(values(torch.cat([a, b], 0))).toEqual([1, 2, 3, 4]);
        expect(torch.cat([a, b], 1).shape).toEqual([1, 4]);
        expect(torch.stack([a, b], 0).shape).toEqual([2, 1, 2]);
        const x = torch.arange(7, undefined, undefined, { device });
        expect(x.split(3).map((t) => values(t))).toEqual([[0, 1, 2], [3, 4, 5], [6]]);
        expect(x.split([2, 5]).map((t) => t.shape[0])).toEqual([2, 5]);
        expect(x.chunk(2).map((t) => t.shape[0])).toEqual([4, 3]);
        expect(torch.stack([a, b]).unbind(0).length).toBe(2);
      });
    });

    test("indexing: indexSelect, gather, scatter, scatterAdd, masked ops, index, indexPut", () => {
      torch.tidy(() => {
        const m = T([1, 2, 3, 4, 5, 6], [3, 2]);
        const idx = T([2, 0], [2], "i64");
        expect(values(m.indexSelect(0, idx))).toEqual([5, 6, 1, 2]);
        expect(values(m.index(idx))).toEqual([5, 6, 1, 2]);
        const g = T([1, 0, 0, 1, 1, 1], [3, 2], "i64");
        expect(values(m.gather(1, g))).toEqual([2, 1, 3, 4, 6, 6]);
        const z = torch.zeros([2, 3], { device });
        const si = T([0, 2, 1, 0], [2, 2], "i64");
        const src = T([1, 2, 3, 4], [2, 2]);
        expect(values(z.scatter(1, si, src))).toEqual([1, 0, 2, 4, 3, 0]);
        expect(values(z.scatter(1, si, 9))).toEqual([9, 0, 9, 9, 9, 0]);
        const sa = torch.zeros([3], { device }).scatterAdd(0, T([0, 0, 2], [3], "i64"), T([1, 2, 3], [3]));
        expect(values(sa)).toEqual([3, 0, 3]);
        const mask = m.gt(3);
        expect(values(m.maskedFill(mask, -1))).toEqual([1, 2, 3, -1, -1, -1]);
        expect(values(m.maskedSelect(mask))).toEqual([4, 5, 6]);
        expect(values(m.index(mask))).toEqual([4, 5, 6]);
        const put = torch.zeros([4], { device }).indexPut(T([1, 3], [2], "i64"), T([7, 8], [2]));
        expect(values(put)).toEqual([0, 7, 0, 8]);
        const acc = torch.zeros([2], { device }).indexPut(T([1, 1], [2], "i64"), T([1, 2], [2]), true);
        expect(values(acc)).toEqual([0, 3]);
        expect(values(m.takeAlongDim(T([1, 0, 1], [3, 1], "i64"), 1))).toEqual([2, 3, 6]);
        expect(values(torch.zeros([3], { device }).indexAdd(0, T([0, 2], [2], "i64"), T([5, 6], [2])))).toEqual([5, 0, 6]);
      });
    });

    test("in-place ops mutate and return the tensor", () => {
      torch.tidy(() => {
        const a = T([1, 2, 3], [3]);
        expect(a.add_(1)).toBe(a);
        expect(values(a)).toEqual([2, 3, 4]);
        a.mul_(T([1, 0, 2], [3])).sub_(1);
        expect(values(a)).toEqual([1, -1, 7]);
        a.clampMin_(0).div_(2);
        expect(values(a)).toEqual([0.5, 0, 3.5]);
        a.copy_(T([9, 9, 9], [3]));
        expect(values(a)).toEqual([9, 9, 9]);
        a.zero_();
        expect(values(a)).toEqual([0, 0, 0]);
        a.fill_(2).maskedFill_(T([1, 0, 1], [3], "bool"), 5);
        expect(values(a)).toEqual([5, 2, 5]);
        const s = torch.zeros([3], { device });
        s.scatterAdd_(0, T([0, 0, 1], [3], "i64"), T([1, 1, 1], [3]));
        expect(values(s)).toEqual([2, 1, 0]);
      });
    });

    test("sort, argsort, topk, kthvalue, multinomial, oneHot", () => {
      torch.tidy(() => {
        const a = T([3, 1, 2, 5], [4]);
        const s = a.sort();
        expect(values(s.values)).toEqual([1, 2, 3, 5]);
        expect(values(s.indices)).toEqual([1, 2, 0, 3]);
        expect(values(a.sort(-1, true).values)).toEqual([5, 3, 2, 1]);
        expect(values(a.argsort(0, true))).toEqual([3, 0, 2, 1]);
        const tk = a.topk(2);
        expect(values(tk.values)).toEqual([5, 3]);
        expect(values(tk.indices)).toEqual([3, 0]);
        expect(values(a.topk(1, -1, false).values)).toEqual([1]);
        expect(a.kthvalue(2).values.item()).toBe(2);
        const g = new torch.Generator({ seed: 1, device });
        const probs = T([0, 0, 1, 0, 0.5, 0.5, 0, 0], [2, 4]);
        const draws = probs.multinomial(1, false, g);
        expect(draws.shape).toEqual([2, 1]);
        expect(values(draws)[0]).toBe(2);
        expect([0, 1]).toContain(values(draws)[1]!);
        const many = T([0.25, 0.75], [2]).multinomial(4000, true, g);
        const ones = values(many).filter((v) => v === 1).length;
        expect(ones).toBeGreaterThan(2800);
        expect(ones).toBeLessThan(3200);
        expect(values(T([0, 2], [2], "i64").oneHot(3))).toEqual([1, 0, 0, 0, 0, 1]);
        g.dispose();
      });
    });
  });
}
