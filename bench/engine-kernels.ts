/**
 * Which kernels one decode step runs, for a kernel profiler (GPU): loads a model
 * directory, decodes a batch eagerly (the same kernels a CUDA-graph step replays) and
 * turns the CUDA profiler's collection on for exactly one step.
 *
 *   ncu --profile-from-start off --metrics gpu__time_duration.sum --csv \
 *     bun bench/engine-kernels.ts --model DIR [--batch 64] > kernels.csv
 *   python3 bench/python/kernel_summary.py kernels.csv
 */
import { parseArgs } from "node:util";
import * as torch from "../src/torch/index.ts";
import { loadEngine } from "../src/engine/load.ts";
import type { LaunchItem } from "../src/engine/step-runner.ts";

const { values: args } = parseArgs({
  options: {
    model: { type: "string" },
    batch: { type: "string", default: "64" },
    /** Which decode step to profile (earlier ones warm up kernels and the allocator). */
    step: { type: "string", default: "16" },
    "fused-kernels": { type: "string", default: "on" },
  },
});
if (!args.model) throw new Error("--model DIR is required");
torch.F.fusedKernels(args["fused-kernels"] !== "off");
const batch = Number(args.batch);
const target = Number(args.step);
const loaded = loadEngine(args.model, { device: "cuda", dtype: "bf16", max_seq_len: 512, max_slots: batch, kv_cache_gib: 4, cuda_graphs: false });
const runner = loaded.runner;
let steps = 0;
// A launched step has queued all of its kernels when launchDecode returns: profile from
// there to a device synchronisation, before the engine queues the next one.
const launch = runner.launchDecode.bind(runner);
runner.launchDecode = (items: LaunchItem[]) => {
  steps++;
  if (steps !== target) return launch(items);
  torch.cuda.synchronize();
  torch.cuda.profiler(true);
  const pending = launch(items);
  torch.cuda.synchronize();
  torch.cuda.profiler(false);
  process.stderr.write(`[engine-kernels] profiled decode step ${steps} at batch ${items.length}\n`);
  return pending;
};
const prompt = (i: number) => ({ tokenIds: Array.from({ length: 128 }, (_, t) => (i * 7919 + t * 104729) % 150000), images: [] });
await Promise.all(
  Array.from({ length: batch }, (_, i) =>
    loaded.engine.generate({ prompt: prompt(i), sampling: { temperature: 0, maxNewTokens: target + 2, ignoreStopTokens: true } }),
  ),
);
await loaded.close();
