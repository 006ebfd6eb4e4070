/**
 * Ids taken out of a distribution over the vocabulary: the engine's sampler and the
 * trainer's log-probs both set their logits to NEVER_SAMPLED_LOGIT (a VLM's vision ids,
 * which no reply may hold), so the two compute the same distribution over the rest.
 */
import { tensor } from "./creation.ts";
import type { Device } from "./dtype.ts";
import type { Tensor } from "./tensor.ts";

/**
 * What a never-sampled id's logit is set to: finite, so exp() underflows to exactly 0 and
 * p log p stays 0 (an entropy over the vocabulary has no NaN), yet far below any real logit.
 */
export const NEVER_SAMPLED_LOGIT = -1e30;

/** The ids of `ids` inside a vocabulary of `vocab`, as an int64 index, or undefined when none are. */
export function neverSampledIndex(ids: readonly number[], vocab: number, device: Device): Tensor | undefined {
  const inside = ids.filter((id) => Number.isInteger(id) && id >= 0 && id < vocab);
  if (inside.length === 0) return undefined;
  return tensor(Float64Array.from(inside), [inside.length], { dtype: "i64", device });
}

/** [..., V] float logits with the indexed ids' set to NEVER_SAMPLED_LOGIT (a new tensor). */
export function withoutNeverSampled(logits: Tensor, index: Tensor): Tensor {
  return logits.indexFill(logits.shape.length - 1, index, NEVER_SAMPLED_LOGIT);
}
