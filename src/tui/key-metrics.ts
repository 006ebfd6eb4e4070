/**
 * The metrics the train view charts, by verl's names, with a fallback where trainers
 * differ. Per-env success rates are found by pattern (`train/<env>/success_rate`), and
 * the validation curve (each validation's mean reward) follows the training reward.
 */
import type { DashboardState, Series } from "./state.ts";

export interface KeyMetric {
  label: string;
  /** The first of these keys the run reports is shown. */
  keys: string[];
}

export const KEY_METRICS: KeyMetric[] = [
  { label: "reward", keys: ["critic/score/mean", "critic/rewards/mean"] },
  { label: "KL", keys: ["actor/ppo_kl", "actor/kl_loss"] },
  { label: "entropy", keys: ["actor/entropy"] },
  { label: "policy loss", keys: ["actor/pg_loss"] },
  { label: "value loss", keys: ["critic/vf_loss"] },
  { label: "response length", keys: ["response_length/mean"] },
  { label: "clip fraction", keys: ["actor/pg_clipfrac"] },
];

export const THROUGHPUT_KEY = "perf/throughput";
export const GPU_MEMORY_KEYS = ["perf/max_memory_allocated_gb", "perf/max_memory_reserved_gb"];

export interface ChartedMetric {
  label: string;
  /** The metric's name (for the validation curve, `VALIDATION_KEY`). */
  key: string;
  series: Series;
}

/** The chart key of the validation curve: no metric of a run has this name. */
export const VALIDATION_KEY = "(validation mean reward)";

/** The charts the run can fill: key metrics it reports, then a success rate per env. */
export function chartedMetrics(state: DashboardState): ChartedMetric[] {
  const charted: ChartedMetric[] = [];
  for (const metric of KEY_METRICS) {
    const key = metric.keys.find((k) => state.series[k]);
    if (key) charted.push({ label: metric.label, key, series: state.series[key]! });
    // Second, so it is among the charts a small terminal still shows.
    if (metric === KEY_METRICS[0] && state.validations.steps.length > 0) charted.push({ label: "val reward", key: VALIDATION_KEY, series: state.validations });
  }
  for (const key of Object.keys(state.series).sort()) {
    const match = /^train\/(.+)\/success_rate$/.exec(key);
    if (match) charted.push({ label: `success ${match[1]}`, key, series: state.series[key]! });
  }
  return charted;
}
