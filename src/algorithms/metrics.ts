/**
 * Loss metrics: named 0-d tensors, detached from the graph, under verl's metric names
 * (`actor/pg_clipfrac`, `critic/vf_loss`, ...). They stay tensors so that computing them
 * never waits for the device; `readMetrics` turns them into numbers when it is time to log.
 */
import type { Tensor } from "../torch/index.ts";

export type LossMetrics = Record<string, Tensor>;

/** Reads every metric into a number and frees the tensors. */
export function readMetrics(metrics: LossMetrics): Record<string, number> {
  const out: Record<string, number> = {};
  for (const [name, t] of Object.entries(metrics)) {
    out[name] = t.item();
    t.dispose();
  }
  return out;
}
