/**
 * Process groups over Gloo on 127.0.0.1, with no GPU: 2 and 3 Bun processes
 * (test/torch/dist-worker.ts) join a group and run every collective and the store on
 * known tensors; a rank that exits, is killed or stalls makes the others fail with a
 * clear error within the group's timeout instead of hanging; a world of one runs in this
 * process (the code path of a single GPU).
 */
import { describe, expect, test } from "bun:test";
import { join } from "node:path";
import { torch } from "./helpers.ts";

const WORKER = join(import.meta.dir, "dist-worker.ts");
const haveGloo = (() => {
  try {
    return torch.distributed.availableBackends().gloo;
  } catch {
    return false;
  }
})();

/** A port nothing listens on now (the OS's pick for port 0). */
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

interface Rank {
  proc: ReturnType<typeof Bun.spawn>;
  messages: Message[];
  stderr: string;
  exitCode: number | null;
  signal: string | null;
}

/**
 * Starts `ranks` of a `worldSize` group running `scenario`, calls `onMessage` for each
 * line a rank prints, and resolves once all have exited. A rank still running after
 * `deadlineMs` (far beyond every timeout) is killed and the test fails: that is a hang.
 */
async function runGroup(
  scenario: string,
  worldSize: number,
  opts: { timeoutMs?: number; initTimeoutMs?: number; ranks?: number[]; deadlineMs?: number; onMessage?: (m: Message, all: Rank[]) => void } = {},
): Promise<Rank[]> {
  const port = freePort();
  // Short collective timeouts keep the failure tests fast; the long init timeout lets
  // ranks start at different times on a loaded machine.
  const timeoutMs = opts.timeoutMs ?? 10_000;
  const initTimeoutMs = opts.initTimeoutMs ?? 30_000;
  const ranks = opts.ranks ?? Array.from({ length: worldSize }, (_, r) => r);
  const env = { ...process.env, OMP_NUM_THREADS: "1" };
  const all: Rank[] = ranks.map((r) => ({
    proc: Bun.spawn([process.execPath, WORKER, scenario, String(r), String(worldSize), String(port), String(timeoutMs), String(initTimeoutMs)], { env, stdout: "pipe", stderr: "pipe" }),
    messages: [],
    stderr: "",
    exitCode: null,
    signal: null,
  }));
  let hung = false;
  const deadline = setTimeout(() => {
    hung = true;
    for (const r of all) r.proc.kill("SIGKILL");
  }, opts.deadlineMs ?? 60_000);
  await Promise.all(
    all.map(async (r) => {
      const readOut = (async () => {
        const decoder = new TextDecoder();
        let buffered = "";
        for await (const chunk of r.proc.stdout as ReadableStream<Uint8Array>) {
          buffered += decoder.decode(chunk, { stream: true });
          let nl: number;
          while ((nl = buffered.indexOf("\n")) >= 0) {
            const line = buffered.slice(0, nl).trim();
            buffered = buffered.slice(nl + 1);
            if (!line.startsWith("{")) continue;
            const m = JSON.parse(line) as Message;
            r.messages.push(m);
            opts.onMessage?.(m, all);
          }
        }
      })();
      const readErr = new Response(r.proc.stderr as ReadableStream<Uint8Array>).text().then((t) => (r.stderr = t));
      r.exitCode = await r.proc.exited;
      r.signal = r.proc.signalCode === null ? null : String(r.proc.signalCode);
      await Promise.all([readOut, readErr]);
    }),
  );
  clearTimeout(deadline);
  if (hung) throw new Error(`scenario ${scenario} (world ${worldSize}) hung: ranks were still running after the deadline\n${all.map((r) => r.stderr).join("\n")}`);
  return all;
}

function only(r: Rank, event: string): Message {
  const found = r.messages.filter((m) => m.event === event);
  if (found.length !== 1) throw new Error(`expected one "${event}" from a rank, got ${JSON.stringify(r.messages)}\nstderr: ${r.stderr}`);
  return found[0]!;
}

const range = (n: number) => Array.from({ length: n }, (_, i) => i);
const sum = (xs: number[]) => xs.reduce((a, b) => a + b, 0);

/** What every collective of the "ops" scenario must give on `rank` of `w`. */
function expectedOps(rank: number, w: number) {
  const ranks = range(w);
  const s = sum(ranks);
  return {
    sum: [sum(ranks.map((r) => r + 1)), sum(ranks.map((r) => 2 * (r + 1)))],
    max: [w - 1, 0],
    min: [0, -(w - 1)],
    avg: [(2 * s) / w, 1],
    intSum: [s, w],
    intDtype: "i64",
    viewSum: [0, 1, 2, 3, 4, 5].map((v) => w * v + s),
    coalesced: [[s], [s, w, 2 * w, 3 * w], [w], [10 * s]],
    gathered: ranks.map((r) => [r, 10 * r]),
    broadcast: [w - 1, w - 1],
    reduceScatter: [s + w * rank, w],
    leaked: 0,
    storeBytes: ranks.map((r) => [r, 0, 255, 128]),
    storeEmpty: ranks.map(() => 0),
    storeBigOk: true,
  };
}

function checkOps(all: Rank[], w: number): void {
  for (const [i, r] of all.entries()) {
    const m = only(r, "ops");
    expect(m.rank).toBe(i);
    expect(m.size).toBe(w);
    expect(m.backend).toBe("gloo");
    const values = m.values as Record<string, unknown>;
    expect(values).toMatchObject(expectedOps(i, w));
    expect(String(values.storeMissing)).toContain(`storeGet("never-set") failed on rank ${i} of ${w}`);
  }
}

/** Runs once, on first use: tests that read the same group share its processes. */
function shared<T>(start: () => Promise<T>): () => Promise<T> {
  let running: Promise<T> | undefined;
  return () => (running ??= start());
}

// Each process loads libtorch (about a second of CPU), so one group serves two tests:
// every collective first, then a failure.
const threeThenExit = shared(() => runGroup("ops,exit", 3, { timeoutMs: 3000 }));
const twoThenKill = shared(() =>
  runGroup("ops,stall", 2, {
    timeoutMs: 3000,
    onMessage: (m, ranks) => {
      if (m.event === "ready") ranks[m.rank]!.proc.kill("SIGKILL");
    },
  }),
);

describe.if(haveGloo)("Gloo process groups", () => {
  test.concurrent("two ranks: all_reduce (sum, max, min, avg, ints, a view), coalesced, all_gather, broadcast, reduce_scatter, barrier, store", async () => {
    checkOps(await twoThenKill(), 2);
  });

  test.concurrent("three ranks: the same", async () => {
    checkOps(await threeThenExit(), 3);
  });

  test("a world of one runs in-process on any free port", () => {
    const pg = torch.distributed.initProcessGroup({ backend: "gloo", masterAddr: "127.0.0.1", masterPort: 0, rank: 0, worldSize: 1, timeoutMs: 5000 });
    try {
      expect(pg.size).toBe(1);
      expect(pg.masterPort).toBeGreaterThan(0);
      const before = torch.liveTensors();
      torch.tidy(() => {
        const t = torch.tensor([1, 2, 3]);
        pg.allReduce(t, "avg");
        pg.allReduceCoalesced([t, torch.tensor([4])], "max");
        pg.broadcast(t, 0);
        const g = pg.allGather(t);
        expect(g.length).toBe(1);
        expect(Array.from(g[0]!.toFloat32Array())).toEqual([1, 2, 3]);
        const out = torch.zeros([3]);
        pg.reduceScatter(out, [t], "sum");
        expect(Array.from(out.toFloat32Array())).toEqual([1, 2, 3]);
        pg.barrier();
      });
      expect(torch.liveTensors()).toBe(before);
      pg.storeSet("greeting", "hello");
      expect(new TextDecoder().decode(pg.storeGet("greeting"))).toBe("hello");
      // Argument errors name the op and the rank, and leave the group usable.
      expect(() => pg.allReduce(torch.tensor([1, 2], [2], { dtype: "i64" }), "avg")).toThrow(/allReduce\(avg\) failed on rank 0 of 1 \(gloo.*avg needs a floating tensor, got i64/);
      expect(() => pg.reduceScatter(torch.zeros([2]), [torch.zeros([3])])).toThrow(/input 0 is f32 \[3\], the output f32 \[2\]/);
      const gone = torch.tensor([1]);
      gone.dispose();
      expect(() => pg.allReduce(gone)).toThrow(/tensor was disposed/);
      expect(() => pg.broadcast(torch.tensor([1]), 1)).toThrow(/root must be a rank in \[0, 0\]/);
      expect(() => pg.allReduce(torch.tensor([1]), "prod" as never)).toThrow(/unknown reduce op "prod"/);
      expect(() => pg.reduceScatter(torch.zeros([1]), [torch.zeros([1]), torch.zeros([1])])).toThrow(/needs one input per rank \(1\), got 2/);
      // None of these reached the backend, so the group still works.
      torch.tidy(() => pg.allReduce(torch.tensor([1])));
    } finally {
      pg.dispose();
    }
    expect(pg.disposed).toBe(true);
    expect(() => pg.barrier()).toThrow(/barrier failed on rank 0 of 1 \(gloo.*disposed/);
  });

  test("processGroupFromEnv reads torchrun's variables", () => {
    const pg = torch.distributed.processGroupFromEnv({ env: { MASTER_ADDR: "127.0.0.1", MASTER_PORT: "0", WORLD_SIZE: "1", RANK: "0" }, timeoutMs: 5000 });
    try {
      expect([pg.backend, pg.rank, pg.size, pg.localRank, pg.masterAddr]).toEqual(["gloo", 0, 1, 0, "127.0.0.1"]);
    } finally {
      pg.dispose();
    }
    expect(() => torch.distributed.processGroupFromEnv({ env: { RANK: "one" } })).toThrow(/RANK="one" is not a non-negative integer/);
    expect(() => torch.distributed.processGroupFromEnv({ env: { WORLD_SIZE: "2", RANK: "2" } })).toThrow(/rank must be an integer in \[0, 1\], got 2/);
  });

  test.concurrent("a rank that exits makes the others fail, and the group then refuses collectives", async () => {
    const all = await threeThenExit();
    expect(all[2]!.exitCode).toBe(3);
    for (const r of all.slice(0, 2)) {
      const e = only(r, "error");
      expect(e.isTorchError).toBe(true);
      expect(e.name).toBe("DistributedError");
      expect(String(e.message)).toMatch(new RegExp(`^allReduce\\(sum\\) failed on rank ${e.rank} of 3 \\(gloo, timeout 3000 ms\\): .+`));
      expect(String(only(r, "second").message)).toContain("unusable after an earlier failure");
      expect(r.exitCode).toBe(0);
    }
  });

  test.concurrent("a rank killed with SIGKILL makes the others fail instead of hanging", async () => {
    const all = await twoThenKill();
    expect(all[1]!.signal).toBe("SIGKILL");
    const e = only(all[0]!, "error");
    expect(String(e.message)).toMatch(/^allReduce\(sum\) failed on rank 0 of 2 \(gloo, timeout 3000 ms\): .+/);
    expect(all[0]!.exitCode).toBe(0);
  });

  test.concurrent("a rank that stays alive but never joins the collective makes the others time out", async () => {
    let stalled: Rank | undefined;
    const all = await runGroup("stall", 2, {
      timeoutMs: 2000,
      onMessage: (m, ranks) => {
        if (m.event === "ready") stalled = ranks[m.rank];
        // Once rank 0 has given up, the stalled rank is no longer needed.
        if (m.event === "second" && stalled) stalled.proc.kill("SIGKILL");
      },
    });
    const e = only(all[0]!, "error");
    expect(String(e.message)).toMatch(/^allReduce\(sum\) failed on rank 0 of 2 \(gloo, timeout 2000 ms\): .*[Tt]imed? ?out/);
  });

  test.concurrent("a rank that never starts makes init fail after the timeout, naming what it waited for", async () => {
    const all = await runGroup("ops", 2, { timeoutMs: 2000, initTimeoutMs: 2000, ranks: [0] });
    const e = only(all[0]!, "error");
    expect(String(e.message)).toMatch(
      /^initProcessGroup failed on rank 0 of 2 \(gloo, master 127\.0\.0\.1:\d+, init timeout 2000 ms, serving the store and waiting for the other ranks\): timed out after 2000 ms waiting for the other ranks: 1 of 2 joined the store at 127\.0\.0\.1:\d+/,
    );
    expect(all[0]!.exitCode).toBe(1);
  });
});

describe("without a group", () => {
  test("bad options are refused before anything connects", () => {
    const init = (o: Partial<torch.distributed.ProcessGroupOptions>) => () =>
      torch.distributed.initProcessGroup({ backend: "gloo", masterAddr: "127.0.0.1", masterPort: 29500, rank: 0, worldSize: 1, ...o });
    expect(init({ backend: "mpi" as never })).toThrow(/unknown backend "mpi"/);
    expect(init({ worldSize: 0 })).toThrow(/worldSize must be an integer in \[1, /);
    expect(init({ worldSize: 2, masterPort: 0 })).toThrow(/masterPort must be an integer in \[1, 65535\], got 0/);
    expect(init({ timeoutMs: 0 })).toThrow(/timeoutMs must be an integer/);
  });

  test.if(!torch.distributed.availableBackends().nccl)("NCCL without NCCL in the shim says so", () => {
    expect(() => torch.distributed.initProcessGroup({ backend: "nccl", masterAddr: "127.0.0.1", masterPort: 0, rank: 0, worldSize: 1 })).toThrow(
      /initProcessGroup failed on rank 0 of 1 \(nccl.*built without nccl/,
    );
  });
});
