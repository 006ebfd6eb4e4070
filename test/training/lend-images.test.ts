/**
 * A row that the token balancer moves to another rank takes its images along: on 2 Gloo
 * ranks (test/training/lend-worker.ts) each rank borrows the other's image row through the
 * store, gets the pixels, offsets and grid its owner has, the store key is deleted once
 * read, and the borrowed pixels are dropped after the update.
 */
import { expect, test } from "bun:test";
import { join } from "node:path";

const WORKER = join(import.meta.dir, "lend-worker.ts");

function freePort(): number {
  const server = Bun.listen({ hostname: "127.0.0.1", port: 0, socket: { data() {} } });
  const port = server.port;
  server.stop(true);
  return port;
}

test(
  "each rank borrows the images of the row it runs for its owner",
  async () => {
    const port = freePort();
    const procs = [0, 1].map((r) => Bun.spawn([process.execPath, WORKER, String(r), String(port)], { env: { ...process.env, OMP_NUM_THREADS: "1" }, stdout: "pipe", stderr: "pipe" }));
    const deadline = setTimeout(() => procs.forEach((p) => p.kill("SIGKILL")), 60_000);
    const out = await Promise.all(procs.map(async (p) => ({ text: await new Response(p.stdout).text(), err: await new Response(p.stderr).text(), code: await p.exited })));
    clearTimeout(deadline);
    const reports = out.map((o) => {
      const line = o.text.split("\n").find((l) => l.startsWith("{"));
      if (!line) throw new Error(`a rank reported nothing (exit ${o.code}):\n${o.err}`);
      return JSON.parse(line) as { held: { offset: number; grid: number[]; width: number; height: number; data: number[] }[][]; borrowed: number; after: number[]; keyLeft: string };
    });
    const image0 = { offset: 1, grid: [1, 1, 1], width: 2, height: 1, data: [1, 2, 3, 4, 5, 6] };
    const image1 = { offset: 1, grid: [1, 1, 1], width: 1, height: 2, data: [7, 8, 9, 10, 11, 12] };
    // rank 0: its own row 0, row 1 borrowed from rank 1; rank 1: the mirror; row 2 has none to lend
    expect(reports[0]!.held).toEqual([[image0], [image1], []]);
    expect(reports[1]!.held).toEqual([[image0], [image1], []]);
    for (const r of reports) {
      expect(r.borrowed).toBe(1);
      expect(r.keyLeft).toBe("deleted");
    }
    // after the update a borrowed row holds no pixels again; an owned row keeps its own
    expect(reports[0]!.after).toEqual([1, 0, 0]);
    expect(reports[1]!.after).toEqual([0, 1, 0]);
  },
  { timeout: 120_000 },
);
