/**
 * Token sampling on the device, for a batch of rows with their own settings.
 *
 * Per row: temperature 0 is greedy (argmax of the raw logits); otherwise logits are
 * divided by the temperature, optionally cut to the top-k tokens and to the smallest set
 * whose probability reaches top-p, and one token is drawn with the exponential-race trick
 * (argmax of p / E with E ~ Exp(1), equivalent to a categorical draw), which needs one
 * uniform draw per (row, vocab entry) and no host round trip.
 *
 * Randomness: a seeded row's uniforms are a hash of its seed and draw (row-streams.ts),
 * so its tokens do not depend on what else shares the batch; unseeded rows share one
 * generator.
 *
 * The log-prob reported for each token is log softmax(logits / temperature) at that token
 * (raw logits for greedy rows): the distribution before top-k/top-p truncation, which is
 * what a trainer recomputes from the same logits.
 *
 * Never-sampled ids (a VLM's image placeholders and vision markers: a reply holding one
 * cannot be fed back, and VAGEN drops its episode) are taken out of the distribution
 * itself: their logits are set to NEVER_SAMPLED_LOGIT (src/torch/logit-mask.ts) before
 * anything else, so neither greedy nor sampled rows pick them and the reported log-probs
 * are those of the distribution over the other ids, which the trainer computes the same
 * way (tokenLogProbs' `neverSampled`). Without it a small policy that drifts towards them
 * in RL loses those episodes, and the drift is never pushed back.
 *
 * Ids and log-probs come back to the host in a single copy, which `sampleRowsOnDevice`
 * leaves to the caller (to start it without waiting, as overlapped decoding does).
 */
import * as torch from "../torch/index.ts";
import { F } from "../torch/index.ts";
import { withoutNeverSampled } from "../torch/logit-mask.ts";
import type { Generator, Tensor } from "../torch/index.ts";
import { streamUniforms, type RowStreams } from "./row-streams.ts";
import type { SamplingOptions } from "./types.ts";

/** One row's settings: the request's sampling options, and its stream key when seeded. */
export interface RowSampling extends Pick<SamplingOptions, "temperature" | "topP" | "topK"> {
  /** This draw's key in the row's own stream (`rowStreamKey(seed, draw)`), or undefined to share the batch's generator. */
  streamKey?: number;
}

export interface SampledRows {
  tokenIds: Int32Array;
  logprobs: Float32Array;
}

/**
 * Samples one token per row of `logits` (N, vocab). `shared` draws for unseeded rows;
 * `streams` (optional) keeps what seeded rows' streams share between calls; `never`
 * (optional, neverSampledIndex) names ids no row may sample.
 * Call inside a tidy scope.
 */
export function sampleRows(logits: Tensor, rows: readonly RowSampling[], shared: Generator, streams?: RowStreams, never?: Tensor): SampledRows {
  const { tokens, logprobs } = sampleRowsOnDevice(logits, rows, shared, streams, never);
  return unpackSamples(packSamples(tokens, logprobs).toFloat32Array());
}

/** (2, N) float32 on the device: ids (exact below 2^24), then log-probs; one copy to the host. */
export function packSamples(tokens: Tensor, logprobs: Tensor): Tensor {
  return torch.stack([tokens.float(), logprobs]);
}

/** The host side of packSamples. */
export function unpackSamples(host: Float32Array): SampledRows {
  const N = host.length / 2;
  return { tokenIds: Int32Array.from(host.subarray(0, N)), logprobs: host.slice(N) };
}

/**
 * sampleRows without the host copy: (N,) int64 token ids and (N,) float32 log-probs on
 * the logits' device. Call inside a tidy scope.
 */
export function sampleRowsOnDevice(logits: Tensor, rows: readonly RowSampling[], shared: Generator, streams?: RowStreams, never?: Tensor): { tokens: Tensor; logprobs: Tensor } {
  const N = rows.length;
  if (never) logits = withoutNeverSampled(logits.float(), never);
  const [, V] = torch.dims2(logits, "logits");
  const device = logits.device;
  let tokens: Tensor;
  let chosen: Tensor;
  if (rows.every((r) => r.temperature === 0)) {
    // One pass over the logits (one kernel on CUDA): argmax and its log-prob.
    [tokens, chosen] = F.argmaxLogprob(logits);
  } else {
    const x = logits.float();
    const temps = torch.tensor(Float32Array.from(rows, (r) => (r.temperature === 0 ? 1 : r.temperature)), [N, 1], { device });
    const logp = x.div(temps).logSoftmax(-1);
    let candidates = logp;
    if (rows.some((r) => r.temperature > 0 && (r.topK > 0 || r.topP < 1))) candidates = truncate(logp, rows, device);
    // Exponential race: argmax(log p - log E), E = -log U.
    const uniform = exponentialRaceUniforms(rows, V, shared, device, streams);
    const race = candidates.sub(uniform.clampMin(1e-20).log().neg().log());
    const sampled = race.argmax(-1);
    const greedyRows = rows.map((r) => r.temperature === 0);
    if (greedyRows.some(Boolean)) {
      const isGreedy = torch.tensor(Uint8Array.from(greedyRows, Number), [N], { dtype: "bool", device });
      tokens = torch.where(isGreedy, x.argmax(-1), sampled);
    } else {
      tokens = sampled;
    }
    chosen = logp.gather(1, tokens.view(N, 1)).view(N);
  }
  return { tokens, logprobs: chosen };
}

/** (N, V) uniforms: seeded rows' from their streams, the others' from `shared`, one batch each. */
function exponentialRaceUniforms(rows: readonly RowSampling[], V: number, shared: Generator, device: torch.Device, streams?: RowStreams): Tensor {
  const seeded = rows.map((r) => r.streamKey !== undefined);
  if (!seeded.some(Boolean)) return torch.rand([rows.length, V], { generator: shared, device });
  // Unseeded rows take key 0's stream here and are replaced below.
  const own = streamUniforms(rows.map((r) => r.streamKey ?? 0), V, device, streams);
  if (seeded.every(Boolean)) return own;
  const isSeeded = torch.tensor(Uint8Array.from(seeded, Number), [rows.length, 1], { dtype: "bool", device });
  return torch.where(isSeeded, own, torch.rand([rows.length, V], { generator: shared, device }));
}

/** Sets log-probs outside each row's top-k / top-p set to -inf. */
function truncate(logp: Tensor, rows: readonly RowSampling[], device: torch.Device): Tensor {
  const N = rows.length;
  const [, V] = torch.dims2(logp, "log-probs");
  const { values, indices } = logp.sort(-1, true);
  const probs = values.exp();
  // Mass strictly before each token; a token is dropped once that already reaches top-p
  // (so the most likely token always survives).
  const before = probs.cumsum(-1).sub(probs);
  const topP = torch.tensor(Float32Array.from(rows, (r) => r.topP), [N, 1], { device });
  const topK = torch.tensor(Float32Array.from(rows, (r) => (r.topK > 0 ? r.topK : V)), [N, 1], { device });
  const rank = torch.arange(V, undefined, 1, { dtype: "f32", device }).view(1, V);
  const drop = before.ge(topP).logicalOr(rank.ge(topK));
  const kept = values.maskedFill(drop, -Infinity);
  return torch.full([N, V], -Infinity, { device }).scatter(1, indices, kept);
}
