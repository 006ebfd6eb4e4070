/**
 * The gradient reducer (DDP's bucketed all-reduce overlapping backward) on 2 Gloo ranks
 * (test/torch/reducer-worker.ts): the same gradients as a plain all-reduce after backward
 * (f32 to 1e-6) with several buckets, micro-batches, parameters that get no gradient and a
 * rank with nothing to backpropagate; with owners (ZeRO-2) each rank keeps only its share;
 * a rank that dies mid-backward makes the other fail with a clear error, not hang.
 */
import { describe, expect, test } from "bun:test";
import { join } from "node:path";
import { torch } from "./helpers.ts";

const WORKER = join(import.meta.dir, "reducer-worker.ts");
const haveGloo = (() => {
  try {
    return torch.distributed.availableBackends().gloo;
  } catch {
    return false;
  }
})();

function freePort(): number {
  const server = Bun.listen({ hostname: "127.0.0.1", port: 0, socket: { data() {} } });
  const port = server.port;
  server.stop(true);
  return port;
}

interface Message {
  rank: number;
  event: string;
  [key: string]: unknown;
}

/** Runs both ranks of `scenario`; a rank still running after the deadline (far past the timeout) is a hang. */
async function runRanks(scenario: string, timeoutMs: number): Promise<{ messages: Message[][]; stderr: string[] }> {
  const port = freePort();
  const env = { ...process.env, OMP_NUM_THREADS: "1" };
  const procs = [0, 1].map((r) => Bun.spawn([process.execPath, WORKER, scenario, String(r), "2", String(port), String(timeoutMs)], { env, stdout: "pipe", stderr: "pipe" }));
  let hung = false;
  const deadline = setTimeout(() => {
    hung = true;
    for (const p of procs) p.kill("SIGKILL");
  }, 90_000);
  const results = await Promise.all(
    procs.map(async (p) => {
      const [out, err] = await Promise.all([new Response(p.stdout).text(), new Response(p.stderr).text()]);
      await p.exited;
      const messages = out
        .split("\n")
        .filter((l) => l.startsWith("{"))
        .map((l) => JSON.parse(l) as Message);
      return { messages, stderr: err };
    }),
  );
  clearTimeout(deadline);
  if (hung) throw new Error(`scenario ${scenario} hung\n${results.map((r) => r.stderr).join("\n")}`);
  return { messages: results.map((r) => r.messages), stderr: results.map((r) => r.stderr) };
}

function maxDiff(a: (number[] | null)[], b: (number[] | null)[]): number {
  let worst = 0;
  a.forEach((x, i) => {
    const y = b[i];
    if (x === null || y === null) {
      if (x !== y) worst = Infinity;
      return;
    }
    x.forEach((v, j) => (worst = Math.max(worst, Math.abs(v - y[j]!) / Math.max(1, Math.abs(v)))));
  });
  return worst;
}

describe.skipIf(!haveGloo)("gradient reducer on 2 Gloo ranks", () => {
  test(
    "bucketed all-reduce during backward gives the plain all-reduce's gradients",
    async () => {
      const { messages, stderr } = await runRanks("equal", 20_000);
      const got = messages.map((m) => m.find((x) => x.event === "equal"));
      if (!got[0] || !got[1]) throw new Error(`a rank reported nothing:\n${stderr.join("\n")}`);
      for (const m of got) {
        const plain = m!.plain as (number[] | null)[][];
        const bucketed = m!.bucketed as (number[] | null)[][];
        // in reverse parameter order, 200 bytes a bucket: early (64 B) + unused (20 B) + b2 (32 B);
        // w2 (512 B) alone; b1 (64 B), which w1 (512 B) would overflow; w1 alone
        expect(m!.buckets).toEqual([[3, 4, 5], [2], [1], [0]]);
        for (let step = 0; step < plain.length; step++) {
          expect(maxDiff(plain[step]!, bucketed[step]!)).toBeLessThanOrEqual(1e-6);
          // the parameter no backward reached is reduced as zeros
          expect(bucketed[step]![4]).toEqual([0, 0, 0, 0, 0]);
        }
        // `early` got its gradient on rank 1 in an early micro-batch of step 0 only: both ranks hold it after the sum
        expect(bucketed[0]![5]!.some((v) => v !== 0)).toBe(true);
      }
      // both ranks hold the same sums
      expect(maxDiff((got[0]!.bucketed as (number[] | null)[][]).flat(), (got[1]!.bucketed as (number[] | null)[][]).flat())).toBe(0);
      // owners: each rank holds its share (halved sums of step 0), the other parameters' gradients are freed
      for (const m of got) {
        const keep = m!.keep as boolean[];
        const kept = m!.kept as (number[] | null)[];
        const full = (m!.bucketed as (number[] | null)[][])[0]!;
        keep.forEach((k, i) => {
          if (!k) expect(kept[i]).toBeNull();
          else expect(maxDiff([kept[i]!], [full[i]!.map((v) => v / 2)])).toBeLessThanOrEqual(1e-6);
        });
        // after dispose a backward accumulates this rank's own gradient only (no hook reduces it)
        const own = m!.afterDispose as (number[] | null)[];
        expect(own[4]).toBeNull();
      }
      const local0 = (got[0]!.afterDispose as (number[] | null)[])[0]!;
      const local1 = (got[1]!.afterDispose as (number[] | null)[])[0]!;
      expect(maxDiff([local0], [local1])).toBeGreaterThan(1e-3);
    },
    { timeout: 120_000 },
  );

  test(
    "a rank that dies mid-backward makes the other's finish fail with a clear error",
    async () => {
      const { messages, stderr } = await runRanks("die", 3_000);
      const error = messages[0]!.find((m) => m.event === "error");
      if (!error) throw new Error(`rank 0 reported no error: ${JSON.stringify(messages[0])}\n${stderr[0]}`);
      expect(error.name).toBe("DistributedError");
      expect(String(error.message)).toMatch(/^gradientReducer\.finish failed on rank 0 of 2 \(gloo, timeout 3000 ms\): /);
      const second = messages[0]!.find((m) => m.event === "second");
      expect(String(second?.message)).toContain("unusable after an earlier failure");
    },
    { timeout: 120_000 },
  );
});
