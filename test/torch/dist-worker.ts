/**
 * One rank of a Gloo process group, started by test/torch/distributed.test.ts:
 *
 *   bun test/torch/dist-worker.ts <scenario> <rank> <worldSize> <port> <timeoutMs> <initTimeoutMs>
 *
 * Prints one JSON object per line on stdout ({"rank", "event", ...}). The scenario is a
 * comma-separated list of steps, run in order:
 *   ops    every collective and the store on known tensors; reports the values
 *          ({"event":"ops"})
 *   exit   after a barrier, the last rank exits; the others try an allReduce and report
 *          its error ({"event":"error"}) and what a second collective says ("second")
 *   stall  after a barrier, the last rank says {"event":"ready"} and blocks (the parent
 *          may SIGKILL it); the others try an allReduce as for exit
 * An init failure is reported as {"event":"error"} and exits with 1.
 */
import * as torch from "../../src/torch/index.ts";

const [scenario, rankArg, worldArg, portArg, timeoutArg, initTimeoutArg] = process.argv.slice(2);
const rank = Number(rankArg);
const worldSize = Number(worldArg);
const masterPort = Number(portArg);
const timeoutMs = Number(timeoutArg);
const initTimeoutMs = Number(initTimeoutArg);

function say(message: Record<string, unknown>): void {
  process.stdout.write(`${JSON.stringify({ rank, ...message })}\n`);
}

function reportError(err: unknown): void {
  const e = err as Error & { op?: string };
  say({ event: "error", name: e.name, op: e.op, message: e.message, isTorchError: err instanceof torch.TorchError });
}

const list = (t: torch.Tensor) => Array.from(t.toFloat64Array());

/** Blocks this thread (and so this rank) without spinning. */
function block(ms: number): void {
  Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, ms);
}

function ops(pg: torch.distributed.ProcessGroup): Record<string, unknown> {
  const before = torch.liveTensors();
  const out: Record<string, unknown> = {};
  torch.tidy(() => {
    const r = rank;
    const sum = torch.tensor([r + 1, 2 * (r + 1)]);
    pg.allReduce(sum, "sum");
    out.sum = list(sum);

    const max = torch.tensor([r, -r]);
    pg.allReduce(max, "max");
    out.max = list(max);

    const min = torch.tensor([r, -r]);
    pg.allReduce(min, "min");
    out.min = list(min);

    const avg = torch.tensor([2 * r, 1], [2], { dtype: "f64" });
    pg.allReduce(avg, "avg");
    out.avg = list(avg);

    const ints = torch.tensor([r, 1], [2], { dtype: "i64" });
    pg.allReduce(ints);
    out.intSum = list(ints);
    out.intDtype = ints.dtype;

    // A non-contiguous view: reduced through a contiguous copy and written back.
    const base = torch.arange(0, 6, 1, { dtype: "f32" }).reshape([2, 3]).add(r);
    const view = base.t();
    pg.allReduce(view, "sum");
    out.viewSum = list(base);

    const parts = [torch.tensor([r]), torch.tensor([r, 1, 2, 3], [2, 2], { dtype: "f64" }), torch.tensor([1], [1], { dtype: "i64" }), torch.tensor([10 * r])];
    pg.allReduceCoalesced(parts, "sum");
    out.coalesced = parts.map(list);

    const gathered = pg.allGather(torch.tensor([r, 10 * r]));
    out.gathered = gathered.map(list);

    const b = torch.tensor([r, r]);
    pg.broadcast(b, worldSize - 1);
    out.broadcast = list(b);

    const scatterOut = torch.zeros([2]);
    const inputs = Array.from({ length: worldSize }, (_, k) => torch.tensor([r + k, 1]));
    pg.reduceScatter(scatterOut, inputs, "sum");
    out.reduceScatter = list(scatterOut);

    pg.barrier();
  });
  out.leaked = torch.liveTensors() - before;

  // Store: bytes (every value 0..255), an empty value, a string, a larger value.
  pg.storeSet(`bytes/${rank}`, new Uint8Array([rank, 0, 255, 128]));
  pg.storeSet(`empty/${rank}`, new Uint8Array(0));
  const big = new Uint8Array(100_000).map((_, i) => (i * 7 + rank) & 255);
  pg.storeSet(`big/${rank}`, big);
  const seen: number[][] = [];
  for (let k = 0; k < worldSize; k++) seen.push(Array.from(pg.storeGet(`bytes/${k}`)));
  out.storeBytes = seen;
  out.storeEmpty = Array.from({ length: worldSize }, (_, k) => pg.storeGet(`empty/${k}`).length);
  const other = pg.storeGet(`big/${(rank + 1) % worldSize}`);
  out.storeBigOk = other.length === big.length && other.every((v, i) => v === ((i * 7 + ((rank + 1) % worldSize)) & 255));
  try {
    pg.storeGet("never-set", 200);
    out.storeMissing = "no error";
  } catch (err) {
    out.storeMissing = (err as Error).message;
  }
  // The group still works after a store timeout.
  pg.barrier();
  return out;
}

function main(): void {
  let pg: torch.distributed.ProcessGroup;
  try {
    pg = torch.distributed.initProcessGroup({ backend: "gloo", masterAddr: "127.0.0.1", masterPort, rank, worldSize, timeoutMs, initTimeoutMs });
  } catch (err) {
    reportError(err);
    process.exit(1);
  }
  const steps = scenario!.split(",");
  if (steps.includes("ops")) say({ event: "ops", size: pg.size, rank: pg.rank, backend: pg.backend, values: ops(pg) });
  const failure = steps.find((s) => s === "exit" || s === "stall");
  if (failure === undefined) {
    pg.barrier();
    pg.dispose();
    return;
  }
  // Every rank is connected to every other before one of them goes away.
  pg.barrier();
  const last = rank === worldSize - 1;
  if (failure === "exit" && last) process.exit(3);
  if (failure === "stall" && last) {
    say({ event: "ready" });
    block(60_000);
    process.exit(0);
  }
  // Everyone else: a collective the missing peer never joins.
  try {
    const t = torch.tensor([1, 2, 3]);
    pg.allReduce(t);
    say({ event: "result", values: list(t) });
  } catch (err) {
    reportError(err);
    // The group now refuses collectives instead of hanging.
    try {
      pg.barrier();
      say({ event: "second", message: "barrier after a failure did not throw" });
    } catch (again) {
      say({ event: "second", message: (again as Error).message });
    }
  }
  process.exit(0);
}

main();
