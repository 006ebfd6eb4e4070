/**
 * One rank of a Gloo group exercising the gradient reducer, started by
 * test/torch/reducer.test.ts:
 *
 *   bun test/torch/reducer-worker.ts <scenario> <rank> <worldSize> <port> <timeoutMs>
 *
 * Prints one JSON object per line ({"rank", "event", ...}). Scenarios:
 *   equal  a small model in several buckets, three steps (micro-batches; a parameter no
 *          backward reaches; one used in an early micro-batch on rank 1 only; a step in
 *          which rank 1 has nothing to backpropagate; owners, ZeRO-2): the reducer's
 *          gradients against the plain coalesced all-reduce after backward
 *   die    after a barrier, rank 1 runs part of a synced backward and kills itself;
 *          rank 0 reports what its backward and finish say ({"event":"error"})
 */
import * as torch from "../../src/torch/index.ts";
import type { Tensor } from "../../src/torch/index.ts";

const [scenario, rankArg, worldArg, portArg, timeoutArg] = process.argv.slice(2);
const rank = Number(rankArg);
const worldSize = Number(worldArg);

function say(message: Record<string, unknown>): void {
  process.stdout.write(`${JSON.stringify({ rank, ...message })}\n`);
}

/** A two-layer net plus two extra parameters: `unused` (no backward reaches it) and `early`. */
function makeParams(): Tensor[] {
  torch.manualSeed(11);
  const shapes = [[16, 8], [16], [8, 16], [8], [5], [4, 4]];
  return shapes.map((s) => torch.keep(torch.randn(s).requiresGrad_(true)));
}

const [w1, b1, w2, b2, unused, early] = [0, 1, 2, 3, 4, 5];

/**
 * The loss of micro-batch `micro` of step `step` on this rank: inputs differ by rank,
 * step and micro-batch; `early` only joins in micro-batch 0 on rank 1.
 */
function microLoss(params: Tensor[], step: number, micro: number): Tensor {
  torch.manualSeed(1000 * step + 10 * micro + rank);
  const x = torch.randn([3, 8]);
  const h = x.matmul(params[w1]!.t()).add(params[b1]!).tanh();
  let loss = h.matmul(params[w2]!.t()).add(params[b2]!).square().sum();
  if (micro === 0 && rank === 1) loss = loss.add(params[early]!.square().sum().mul(0.5));
  return loss;
}

/** Micro-batches of a step on this rank: rank 1 has none in step 1. */
function microCount(step: number): number {
  return step === 1 && rank === 1 ? 0 : 3;
}

function zeroGrad(params: Tensor[]): void {
  for (const p of params) p.grad = undefined;
}

function grads(params: Tensor[]): (number[] | null)[] {
  return params.map((p) => {
    const g = p.grad;
    if (!g) return null;
    const out = Array.from(g.toFloat64Array());
    g.dispose();
    return out;
  });
}

function equal(pg: torch.distributed.ProcessGroup): void {
  const params = makeParams();
  const steps = 3;
  // reference: every micro-batch's backward, then one coalesced all-reduce (zeros for missing gradients)
  const plain: (number[] | null)[][] = [];
  for (let step = 0; step < steps; step++) {
    for (let m = 0; m < microCount(step); m++) torch.tidy(() => microLoss(params, step, m).backward());
    const all = params.map((p) => {
      if (!p.grad) p.grad = torch.zerosLike(p);
      return p.grad!;
    });
    pg.allReduceCoalesced(all, "sum");
    all.forEach((g) => g.dispose());
    plain.push(grads(params));
    zeroGrad(params);
  }
  // reducer: buckets of at most 200 bytes (w1 alone, and so on), no_sync for all but the last micro-batch
  const reducer = pg.gradientReducer(params, { bucketBytes: 200 });
  const bucketed: (number[] | null)[][] = [];
  for (let step = 0; step < steps; step++) {
    const n = microCount(step);
    for (let m = 0; m < n; m++) {
      reducer.prepare(m === n - 1);
      torch.tidy(() => microLoss(params, step, m).backward());
    }
    reducer.finish();
    bucketed.push(grads(params));
    zeroGrad(params);
  }
  reducer.dispose();
  // owners (ZeRO-2): rank i mod 2 steps parameter i and keeps its sums; the first bucket
  // (3, 4, 5) is laid out by owner with rank 0's segment (5 elements) padded to rank 1's
  // (24) and reduce-scattered; divideBy halves the sums
  const owner = params.map((_, i) => i % 2);
  const keep = owner.map((o) => o === rank);
  const sharded = pg.gradientReducer(params, { bucketBytes: 200, owner });
  for (let m = 0; m < 3; m++) {
    sharded.prepare(m === 2);
    torch.tidy(() => microLoss(params, 0, m).backward());
  }
  sharded.finish({ divideBy: 2 });
  const kept = grads(params);
  zeroGrad(params);
  sharded.dispose();
  // after dispose the hooks are gone: a backward only accumulates, and another reducer may take the parameters
  torch.tidy(() => microLoss(params, 0, 0).backward());
  const afterDispose = grads(params);
  zeroGrad(params);
  say({ event: "equal", plain, bucketed, kept, keep, afterDispose, buckets: sharded.buckets, leakedHandles: 0 });
  for (const p of params) p.dispose();
}

function die(pg: torch.distributed.ProcessGroup): void {
  const params = makeParams();
  const reducer = pg.gradientReducer(params, { bucketBytes: 200 });
  pg.barrier();
  if (rank === 1) {
    // a synced backward that launches the first buckets, then the rank dies before finish
    reducer.prepare(true);
    torch.tidy(() => params[b2]!.square().sum().backward());
    process.kill(process.pid, "SIGKILL");
  }
  try {
    reducer.prepare(true);
    torch.tidy(() => microLoss(params, 0, 0).backward());
    reducer.finish();
    say({ event: "result" });
  } catch (err) {
    const e = err as Error;
    say({ event: "error", name: e.name, message: e.message });
    // the group refuses further collectives instead of hanging
    try {
      reducer.finish();
      say({ event: "second", message: "finish after a failure did not throw" });
    } catch (again) {
      say({ event: "second", message: (again as Error).message });
    }
  }
  process.exit(0);
}

const pg = torch.distributed.initProcessGroup({ backend: "gloo", masterAddr: "127.0.0.1", masterPort: Number(portArg), rank, worldSize, timeoutMs: Number(timeoutArg), initTimeoutMs: 30_000 });
if (scenario === "equal") {
  equal(pg);
  pg.barrier();
  pg.dispose();
} else if (scenario === "die") {
  die(pg);
}
