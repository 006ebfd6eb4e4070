/**
 * Data parallel on CPU ranks (Gloo): the same global batch on 1 and 2 ranks trains the
 * same (metrics to 1e-5 at steps 1 and 2 and 1e-3 at step 3, weights to 1e-5 after the first two), a
 * checkpoint of a 2-rank run resumes on 1 rank exactly, and a rank that dies makes the
 * other exit non-zero with a message naming what it waited for, within the timeout.
 */
import { describe, expect, test } from "bun:test";
import { existsSync, mkdtempSync, readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { spawn } from "bun";
import * as torch from "../../src/torch/index.ts";
import { rankItems } from "../../src/training/data-parallel.ts";
import { partitionParameters } from "../../src/training/zero.ts";
import { gradientBuckets } from "../../src/torch/distributed.ts";

const CONFIG = join(import.meta.dir, "digit.yaml");
const MAIN = join(import.meta.dir, "../../src/cli/main.ts");

/**
 * Rollout correction off: its weights read the engine's sampled log-probs, which move in
 * their last bits with how the engine batched a step's requests (different on one rank and
 * on two). The actor's lr is 1e-3, not the config's 1e-2, and Adam's eps 1e-6, not 1e-8:
 * Adam's first step is lr * g / (|g| + eps), so a weight whose gradient nearly cancels over
 * the batch (|g| near eps, common in the LM head where advantages sum to zero over a
 * group) turns the summation-order bits of two ranks' partial sums into a fraction of lr.
 * Measured at eps 1e-8: after step 1, 2.4e-5 apart at lr 1e-2, and at 1e-3 2.4e-6 or
 * 1.6e-5 depending on the episodes drawn (one lm_head entry); at eps 1e-6 8.6e-7, while
 * the step still moves 76,503 of the 205,024 weights by more than 1e-4 (a wrong reduction
 * moves weights by about lr).
 */
function args(dir: string, extra: string[] = []): string[] {
  return ["bun", MAIN, "train", CONFIG, `trainer.output_dir=${dir}`, "trainer.total_steps=3", "trainer.save_freq=1", "trainer.keep_checkpoints=3", "algorithm.rollout_correction.rollout_is=null", "actor.optim.lr=1e-3", "actor.optim.eps=1e-6", "--no-tui", "--quiet-phases", ...extra];
}

/** Weights after steps 1 and 2 to 1e-5 (see args). */
const WEIGHT_TOLERANCE: Record<number, number> = { 1: 1e-5, 2: 1e-5 };

async function run(cmd: string[], env: Record<string, string> = {}): Promise<{ code: number; stderr: string }> {
  const child = spawn(cmd, { stdout: "ignore", stderr: "pipe", env: { ...process.env, OMP_NUM_THREADS: "1", ...env } });
  const stderr = await new Response(child.stderr).text();
  return { code: await child.exited, stderr };
}

/** metrics.jsonl without wall-clock entries. */
function metrics(dir: string): Record<string, number>[] {
  return readFileSync(join(dir, "metrics.jsonl"), "utf8")
    .trim()
    .split("\n")
    .map((l) => Object.fromEntries(Object.entries(JSON.parse(l) as Record<string, number>).filter(([k]) => !k.startsWith("timing_s/") && !k.startsWith("perf/"))));
}

/**
 * Metrics to 1e-5 at steps 1 and 2, and to 1e-3 at step 3: by then the summation-order
 * bits (see args) have gone through two Adam steps.
 */
function expectSameMetrics(a: Record<string, number>[], b: Record<string, number>[]): void {
  expect(b.length).toBe(a.length);
  a.forEach((line, i) => {
    expect(Object.keys(b[i]!).sort()).toEqual(Object.keys(line).sort());
    const tolerance = line.step! <= 2 ? 1e-5 : 1e-3;
    for (const [k, v] of Object.entries(line)) {
      const w = b[i]![k]!;
      if (Math.abs(v - w) > tolerance * Math.max(1, Math.abs(v))) throw new Error(`step ${line.step} ${k}: ${v} vs ${w}`);
    }
  });
}

function maxWeightDiff(a: string, b: string): number {
  const x = torch.safetensors.loadSharded(a);
  const y = torch.safetensors.loadSharded(b);
  let worst = 0;
  for (const [k, t] of x) worst = Math.max(worst, torch.tidy(() => t.sub(y.get(k)!).abs().max().item()));
  for (const t of [...x.values(), ...y.values()]) t.dispose();
  return worst;
}

describe("rank shares", () => {
  test("every world-th item from the rank: groups stay whole, shares cover the batch once", () => {
    expect(rankItems(5, 0, 2)).toEqual([0, 2, 4]);
    expect(rankItems(5, 1, 2)).toEqual([1, 3]);
    expect([...rankItems(7, 0, 3), ...rankItems(7, 1, 3), ...rankItems(7, 2, 3)].sort()).toEqual([0, 1, 2, 3, 4, 5, 6]);
  });
});

describe("ZeRO-1 partition", () => {
  test("largest first, each to the least loaded rank", () => {
    // sizes 10, 7, 5, 3, 1 on 2 ranks: 10 -> 0, 7 -> 1, 5 -> 1 (7 < 10), 3 -> 0, 1 -> 1 (12 < 13)
    expect(partitionParameters([10, 7, 5, 3, 1], 2)).toEqual([0, 1, 1, 0, 1]);
    expect(partitionParameters([4, 4], 1)).toEqual([0, 0]);
  });

  test("within gradient buckets: each bucket's shares as even as whole parameters allow", () => {
    // buckets [0, 1, 2] and [3, 4]. Bucket 1: 10 -> 0, 7 -> 1, 5 -> 1 (7 < 10): shares 10 / 12.
    // Bucket 2 starts even within itself, so 6 -> 0 (fewest overall: 10 < 12), 3 -> 1: 6 / 3.
    expect(partitionParameters([10, 7, 5, 6, 3], 2, [[0, 1, 2], [3, 4]])).toEqual([0, 1, 1, 0, 1]);
    // one bucket is the whole-model rule
    expect(partitionParameters([10, 7, 5, 3, 1], 2, [[0, 1, 2, 3, 4]])).toEqual(partitionParameters([10, 7, 5, 3, 1], 2));
    // a parameter alone in its bucket goes to the least loaded rank: 4 -> 0, 5 -> 1, 8 -> 0 (4 < 5)
    expect(partitionParameters([8, 5, 4], 2, [[2], [1], [0]])).toEqual([0, 1, 0]);
  });

  test("gradientBuckets follows the reducer's rule: reverse order, by cap, dtype and device", () => {
    const p = (n: number, dtype: "f32" | "bf16" = "f32", device = "cpu") => ({ numel: () => n, dtype, device });
    // 4-byte elements, cap 40 bytes: from the end, 3 + 5 elements (32 B), then 4 overflows
    expect(gradientBuckets([p(2), p(4), p(3), p(5)], 40)).toEqual([[2, 3], [0, 1]]);
    // a parameter over the cap alone; a dtype change starts a bucket
    expect(gradientBuckets([p(1), p(20), p(1, "bf16"), p(1, "bf16")], 40)).toEqual([[2, 3], [1], [0]]);
    expect(gradientBuckets([p(1, "f32", "cuda:0"), p(1)], 40)).toEqual([[1], [0]]);
  });
});

describe("data parallel on 2 CPU ranks", () => {
  const root = mkdtempSync(join(tmpdir(), "vagen-dp-"));
  const one = join(root, "one");
  const two = join(root, "two");

  test(
    "the same global batch on 1 and 2 ranks trains the same",
    async () => {
      expect((await run(args(one))).code).toBe(0);
      const launched = await run(args(two, ["trainer.n_gpus_per_node=2", "trainer.dist_timeout_s=60"]));
      expect(launched.code).toBe(0);
      expectSameMetrics(metrics(one), metrics(two));
      for (const step of [1, 2]) expect(maxWeightDiff(join(one, "checkpoints", `step_${step}`, "actor"), join(two, "checkpoints", `step_${step}`, "actor"))).toBeLessThanOrEqual(WEIGHT_TOLERANCE[step]!);
      // rank 0 alone writes: one metrics line per step, no lock left behind
      expect(metrics(two).length).toBe(3);
      expect(existsSync(join(two, ".lock"))).toBe(false);
    },
    { timeout: 300_000 },
  );

  test(
    "a torchrun launch of one rank (a process group of one) runs the data-parallel path and trains as one process",
    async () => {
      const single = join(root, "group-of-one");
      const port = 29000 + Math.floor(Math.random() * 1000);
      const torchrun = { MASTER_ADDR: "127.0.0.1", MASTER_PORT: String(port), WORLD_SIZE: "1", RANK: "0", LOCAL_RANK: "0" };
      const launched = await run(args(single, ["trainer.ddp_bucket_mb=0.1"]), torchrun);
      expect(launched.code).toBe(0);
      expectSameMetrics(metrics(one), metrics(single));
      // the update's rank metrics exist only on the data-parallel path
      const raw = JSON.parse(readFileSync(join(single, "metrics.jsonl"), "utf8").trim().split("\n")[0]!) as Record<string, number>;
      expect(raw["perf/actor_tokens_rank_max"]).toBeGreaterThan(0);
      // measured bit-equal; bounded as the 2-rank runs are, since the engine's batching of a step may differ between any two runs
      for (const step of [1, 2]) expect(maxWeightDiff(join(one, "checkpoints", `step_${step}`, "actor"), join(single, "checkpoints", `step_${step}`, "actor"))).toBeLessThanOrEqual(WEIGHT_TOLERANCE[step]!);
    },
    { timeout: 300_000 },
  );

  test(
    "a 2-rank checkpoint resumes on 1 rank exactly",
    async () => {
      const resumed = join(root, "resumed");
      expect((await run(args(resumed, ["trainer.n_gpus_per_node=2", "trainer.total_steps=2"]))).code).toBe(0);
      expect((await run(args(resumed))).code).toBe(0);
      expectSameMetrics(metrics(one), metrics(resumed));
    },
    { timeout: 300_000 },
  );

  test(
    "ZeRO-1 (optimizer state sharded) trains the same, and its checkpoint resumes on 1 rank exactly",
    async () => {
      const zero = join(root, "zero");
      expect((await run(args(zero, ["trainer.n_gpus_per_node=2", "trainer.zero_stage=1"]))).code).toBe(0);
      expectSameMetrics(metrics(one), metrics(zero));
      for (const step of [1, 2]) {
        expect(maxWeightDiff(join(one, "checkpoints", `step_${step}`, "actor"), join(zero, "checkpoints", `step_${step}`, "actor"))).toBeLessThanOrEqual(WEIGHT_TOLERANCE[step]!);
        // the checkpoint's optimizer state is gathered into an unsharded AdamW's layout
        const a = torch.safetensors.load(join(one, "checkpoints", `step_${step}`, "actor", "optimizer.safetensors"));
        const b = torch.safetensors.load(join(zero, "checkpoints", `step_${step}`, "actor", "optimizer.safetensors"));
        expect([...b.keys()].sort()).toEqual([...a.keys()].sort());
        for (const [k, t] of a) expect(torch.tidy(() => t.sub(b.get(k)!).abs().max().item() / Math.max(1e-12, t.abs().max().item()))).toBeLessThanOrEqual(step === 1 ? 1e-5 : 1e-2);
        for (const t of [...a.values(), ...b.values()]) t.dispose();
      }
      const resumed = join(root, "zero-resumed");
      expect((await run(args(resumed, ["trainer.n_gpus_per_node=2", "trainer.zero_stage=1", "trainer.total_steps=2"]))).code).toBe(0);
      expect((await run(args(resumed))).code).toBe(0);
      expectSameMetrics(metrics(one), metrics(resumed));
    },
    { timeout: 300_000 },
  );

  test(
    "a rank that dies makes the other exit non-zero with a clear message within the timeout",
    async () => {
      const dir = join(root, "killed");
      const port = 29000 + Math.floor(Math.random() * 1000);
      const env = (rank: number) => ({ ...process.env, OMP_NUM_THREADS: "1", MASTER_ADDR: "127.0.0.1", MASTER_PORT: String(port), WORLD_SIZE: "2", RANK: String(rank), LOCAL_RANK: String(rank) });
      const cmd = args(dir, ["trainer.total_steps=50", "trainer.save_freq=0", "trainer.dist_timeout_s=5"]);
      const rank0 = spawn(cmd, { stdout: "ignore", stderr: "pipe", env: env(0) });
      const rank1 = spawn(cmd, { stdout: "ignore", stderr: "ignore", env: env(1) });
      let log = "";
      const decoder = new TextDecoder();
      const started = performance.now();
      for await (const chunk of rank0.stderr) {
        log += decoder.decode(chunk);
        if (log.includes("[step 2/50]") && !rank1.killed) rank1.kill("SIGKILL");
      }
      const code = await rank0.exited;
      expect(code).not.toBe(0);
      expect(log).toMatch(/failed in step \d+/);
      // e.g. storeGet("step/3/rollout/1") failed on rank 0 of 2 (gloo, timeout 5000 ms): Socket Timeout
      expect(log).toMatch(/failed on rank 0 of 2 \(gloo, timeout 5000 ms\)/);
      // within the 5 s timeout and the model load, not the default 10 minutes
      expect((performance.now() - started) / 1000).toBeLessThan(120);
    },
    { timeout: 300_000 },
  );
});
