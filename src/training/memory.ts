/**
 * A step's memory figures, under verl's keys: the peak CUDA allocation and reservation of
 * the step on this rank's GPU (the caching allocator's own counters, reset when the step
 * starts), and the host memory the process holds at the step's end (its resident set:
 * with optimizer_offload, AdamW's state). Data parallel: the largest over the ranks.
 */
import * as torch from "../torch/index.ts";
import { exchange } from "./data-parallel.ts";
import type { RankContext } from "./ranks.ts";

const GIB = 1024 ** 3;

/** Starts a step's CUDA peaks from what is held now. */
export function resetStepMemory(device: string): void {
  if (device.startsWith("cuda")) torch.cuda.resetPeakMemoryStats(device as torch.Device);
}

/** The step's figures (every rank must call it, in step order: `key` names the exchange). */
export function stepMemory(device: string, ranks: RankContext, key: string): Record<string, number> {
  const local: Record<string, number> = { "perf/cpu_memory_rss_gb": process.memoryUsage.rss() / GIB };
  if (device.startsWith("cuda")) {
    const stats = torch.cuda.memoryStats(device as torch.Device);
    local["perf/max_memory_allocated_gb"] = stats.peakAllocated / GIB;
    local["perf/max_memory_reserved_gb"] = stats.peakReserved / GIB;
  }
  if (!ranks.group) return local;
  const all = exchange(ranks, key, local);
  return Object.fromEntries(Object.keys(local).map((k) => [k, Math.max(...all.map((r) => r[k] ?? 0))]));
}
