import { describe, expect, test } from "bun:test";
import { torch, values } from "../helpers.ts";

export function memorySuite(device: string): void {
  describe(`memory: scopes free deterministically [${device}]`, () => {
    test("tidy frees everything not returned, and returned tensors survive", () => {
      const before = torch.liveTensors();
      const out = torch.tidy(() => {
        const a = torch.ones([4], { device });
        const b = a.mul(3).add(1);
        return b.sum();
      });
      expect(torch.liveTensors()).toBe(before + 1);
      expect(out.item()).toBe(16);
      out.dispose();
      expect(torch.liveTensors()).toBe(before);
    });

    test("tidy keeps tensors inside returned arrays, objects and maps", () => {
      const before = torch.liveTensors();
      const r = torch.tidy(() => {
        const a = torch.zeros([2], { device });
        const b = torch.ones([2], { device });
        const c = torch.full([2], 2, { device });
        torch.ones([9], { device }); // garbage
        return { list: [a], nested: { b }, map: new Map([["c", c]]), n: 3 };
      });
      expect(torch.liveTensors()).toBe(before + 3);
      expect(values(r.nested.b)).toEqual([1, 1]);
      r.list[0]!.dispose();
      r.nested.b.dispose();
      r.map.get("c")!.dispose();
      expect(torch.liveTensors()).toBe(before);
    });

    test("nested tidy hands results to the outer scope; keep() escapes all scopes", () => {
      const before = torch.liveTensors();
      let kept: torch.Tensor | undefined;
      torch.tidy(() => {
        const inner = torch.tidy(() => torch.ones([3], { device }).mul(2));
        expect(inner.isDisposed).toBe(false);
        kept = torch.keep(torch.zeros([1], { device }));
      });
      expect(kept!.isDisposed).toBe(false);
      expect(torch.liveTensors()).toBe(before + 1);
      kept!.dispose();
      expect(torch.liveTensors()).toBe(before);
    });

    test("returning a tensor created outside the scope leaves its ownership alone", () => {
      const param = torch.ones([2], { device });
      torch.tidy(() => {
        const same = torch.tidy(() => param);
        expect(same).toBe(param);
      });
      expect(param.isDisposed).toBe(false);
      param.dispose();
    });

    test("tidy frees on throw and refuses async functions", () => {
      const before = torch.liveTensors();
      expect(() =>
        torch.tidy(() => {
          torch.ones([2], { device });
          throw new Error("boom");
        }),
      ).toThrow("boom");
      expect(torch.liveTensors()).toBe(before);
      expect(() => torch.tidy(async () => torch.ones([2], { device }))).toThrow(/synchronous/);
      expect(torch.liveTensors()).toBe(before);
    });

    test("`using` disposes at the end of the block", () => {
      const before = torch.liveTensors();
      {
        using t = torch.ones([5], { device });
        expect(t.numel()).toBe(5);
        expect(torch.liveTensors()).toBe(before + 1);
      }
      expect(torch.liveTensors()).toBe(before);
    });

    test("a long loop of ops inside tidy leaks nothing", () => {
      const before = torch.liveTensors();
      const w = torch.keep(torch.randn([16, 16], { device }).requiresGrad_());
      for (let step = 0; step < 20; step++) {
        torch.tidy(() => {
          const x = torch.randn([4, 16], { device });
          const loss = x.matmul(w).relu().square().mean();
          loss.backward();
          const g = w.grad!;
          torch.noGrad(() => w.sub_(g.mul(0.01)));
          w.grad = undefined;
          const parts = x.split(1);
          torch.cat(parts).sum().item();
        });
      }
      w.dispose();
      expect(torch.liveTensors()).toBe(before);
    });

    test("the GC backstop frees unreachable tensors and counts them", () => {
      const freedBefore = torch.tensorsFreedByGc();
      const liveBefore = torch.liveTensors();
      (() => {
        for (let i = 0; i < 50; i++) torch.ones([8], { device });
      })();
      expect(torch.liveTensors()).toBe(liveBefore + 50);
      Bun.gc(true);
      // FinalizationRegistry callbacks run as tasks; a synchronous GC does not run them.
      return new Promise<void>((resolve) => {
        setTimeout(() => {
          Bun.gc(true);
          setTimeout(() => {
            expect(torch.tensorsFreedByGc() - freedBefore).toBeGreaterThan(0);
            expect(torch.liveTensors()).toBeLessThan(liveBefore + 50);
            resolve();
          }, 20);
        }, 20);
      });
    });

    test("a tensor ledger ignores what the backstop frees of earlier leaks, and counts its own", async () => {
      const collect = async () => {
        Bun.gc(true);
        await new Promise((r) => setTimeout(r, 20));
        Bun.gc(true);
        await new Promise((r) => setTimeout(r, 20));
      };
      // Leaked before the ledger opens: freed by the backstop while the ledger is open.
      (() => {
        for (let i = 0; i < 20; i++) torch.ones([4], { device });
      })();
      const ledger = torch.tensorLedger();
      const kept = torch.ones([4], { device });
      expect(ledger.leaked()).toBe(1);
      await collect();
      expect(ledger.leaked()).toBe(1); // the earlier leaks cancel out
      kept.dispose();
      expect(ledger.leaked()).toBe(0);
      // Leaked inside the ledger and then freed by the backstop: still a leak.
      const freed = torch.tensorsFreedByGc();
      (() => {
        for (let i = 0; i < 20; i++) torch.ones([4], { device });
      })();
      await collect();
      expect(ledger.leaked()).toBe(20);
      expect(torch.tensorsFreedByGc()).toBeGreaterThan(freed);
    });
  });
}
