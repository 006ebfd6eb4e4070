/**
 * Next-token selection on the host, from one row of float32 logits. Host-side sampling
 * with our own seeded generator makes a run reproducible bit for bit across machines
 * and devices given the same logits (libtorch's device RNG streams differ between CPU
 * and CUDA).
 *
 * Log-probabilities are those of the distribution the token was drawn from before top-p
 * truncation: log_softmax(logits / temperature), or log_softmax(logits) when greedy.
 */
export interface SamplingOptions {
  /** 0 (or less) means greedy. */
  temperature: number;
  /** Nucleus size in (0, 1]; 1 disables top-p. */
  topP: number;
}

export interface Sampled {
  token: number;
  logprob: number;
}

/** A small, fast, seedable PRNG (SplitMix32 variant); uniform floats in [0, 1). */
export class SeededRandom {
  private state: number;

  constructor(seed: number) {
    this.state = seed >>> 0;
  }

  next(): number {
    this.state = (this.state + 0x9e3779b9) >>> 0;
    let z = this.state;
    z = Math.imul(z ^ (z >>> 16), 0x85ebca6b) >>> 0;
    z = Math.imul(z ^ (z >>> 13), 0xc2b2ae35) >>> 0;
    z = (z ^ (z >>> 16)) >>> 0;
    return z / 4294967296;
  }
}

function logSumExp(values: ArrayLike<number>, scale: number): number {
  let max = -Infinity;
  for (let i = 0; i < values.length; i++) max = Math.max(max, values[i]! * scale);
  let sum = 0;
  for (let i = 0; i < values.length; i++) sum += Math.exp(values[i]! * scale - max);
  return max + Math.log(sum);
}

export function argmax(values: ArrayLike<number>): number {
  let best = 0;
  for (let i = 1; i < values.length; i++) if (values[i]! > values[best]!) best = i;
  return best;
}

export function sampleToken(logits: ArrayLike<number>, opts: SamplingOptions, rng: SeededRandom): Sampled {
  if (opts.temperature <= 0) {
    const token = argmax(logits);
    return { token, logprob: logits[token]! - logSumExp(logits, 1) };
  }
  const scale = 1 / opts.temperature;
  const lse = logSumExp(logits, scale);
  const n = logits.length;
  const probs = new Float64Array(n);
  for (let i = 0; i < n; i++) probs[i] = Math.exp(logits[i]! * scale - lse);
  let candidates: number[];
  if (opts.topP < 1) {
    // Most likely first; keep the smallest prefix whose mass reaches top_p.
    const order = Array.from({ length: n }, (_, i) => i).sort((a, b) => probs[b]! - probs[a]! || a - b);
    candidates = [];
    let mass = 0;
    for (const i of order) {
      candidates.push(i);
      mass += probs[i]!;
      if (mass >= opts.topP) break;
    }
  } else {
    candidates = Array.from({ length: n }, (_, i) => i);
  }
  let total = 0;
  for (const i of candidates) total += probs[i]!;
  let u = rng.next() * total;
  let token = candidates[candidates.length - 1]!;
  for (const i of candidates) {
    u -= probs[i]!;
    if (u < 0) {
      token = i;
      break;
    }
  }
  return { token, logprob: logits[token]! * scale - lse };
}
