/**
 * Token log-probabilities and entropies from logits, a chunk of tokens at a time.
 *
 * A vocabulary of 150k in float32 is 600 KB per token, so the [B, T, V] float32
 * log-softmax of a whole batch can outgrow the model. Rows of tokens are processed in
 * chunks: each chunk is upcast (bf16/f16 -> f32; f64 stays f64), log-softmaxed, gathered
 * and reduced, so only one chunk's float copy exists at a time. With gradients on, each
 * chunk runs under activation checkpointing (its softmax is recomputed in backward
 * instead of being kept), which keeps backward within the same bound. The numbers are the
 * direct log_softmax computation's.
 */
import * as torch from "../torch/index.ts";
import type { Tensor } from "../torch/index.ts";

export interface TokenLogProbOptions {
  /** Tokens per chunk (default 1024). */
  chunkTokens?: number;
  /** Also compute the entropy of each position's distribution (default true). */
  withEntropy?: boolean;
  /** Logits are divided by this before the softmax (the sampling temperature; default 1). */
  temperature?: number;
}

export interface TokenLogProbs {
  /** [B, T] log softmax(logits)[token], float32 (float64 for float64 logits). */
  logProbs: Tensor;
  /** [B, T] −Σ_v p_v log p_v, when asked for. */
  entropy?: Tensor;
}

/** The float dtype a chunk is computed in: f64 stays f64, everything else goes to f32. */
function computeDtype(t: Tensor): "f32" | "f64" {
  return t.dtype === "f64" ? "f64" : "f32";
}

/**
 * logits: [B, T, V]; tokens: [B, T] integer ids, the token at each position (already
 * shifted so logits[b, t] predicts tokens[b, t]). Returns [B, T] log-probs and entropies.
 */
export function tokenLogProbs(logits: Tensor, tokens: Tensor, opts: TokenLogProbOptions = {}): TokenLogProbs {
  const shape = logits.shape;
  if (shape.length !== 3) throw new Error(`tokenLogProbs logits: expected [rows, tokens, vocab], got shape [${shape.join(", ")}]`);
  const [rows, width, vocab] = shape as [number, number, number];
  if (tokens.shape.join(",") !== `${rows},${width}`) {
    throw new Error(`tokenLogProbs tokens: expected shape [${rows}, ${width}] (the logits' rows and tokens), got [${tokens.shape.join(", ")}]`);
  }
  const chunk = opts.chunkTokens ?? 1024;
  if (!(Number.isInteger(chunk) && chunk >= 1)) throw new Error(`chunkTokens: expected an integer >= 1, got ${chunk}`);
  const withEntropy = opts.withEntropy ?? true;
  const temperature = opts.temperature ?? 1;
  if (!(temperature > 0)) throw new Error(`temperature: expected a number > 0, got ${temperature}`);
  const dtype = computeDtype(logits);

  return torch.tidy(() => {
    const flatLogits = logits.reshape(-1, vocab); // [N, V]
    const flatTokens = tokens.reshape(-1, 1).to({ dtype: "i64" }); // [N, 1]
    const n = rows * width;
    // One chunk: [n, V] logits -> [2, n] (log-prob, entropy) or [1, n].
    const perChunk = (part: Tensor, ids: Tensor): Tensor => {
      let x = part.to({ dtype });
      if (temperature !== 1) x = x.div(temperature);
      const logp = x.logSoftmax(-1);
      const picked = logp.gather(1, ids).squeeze(1);
      if (!withEntropy) return picked.unsqueeze(0);
      const entropy = logp.exp().mul(logp).sum(-1).neg();
      return torch.stack([picked, entropy]);
    };
    const recompute = torch.isGradEnabled() && logits.requiresGrad;
    const pieces: Tensor[] = [];
    for (let start = 0; start < n; start += chunk) {
      const len = Math.min(chunk, n - start);
      const part = flatLogits.narrow(0, start, len);
      const ids = flatTokens.narrow(0, start, len);
      // ids go in as a checkpoint input, not a closure: the recompute runs in backward,
      // after this scope has freed its own tensors
      pieces.push(recompute ? torch.checkpoint(perChunk, part, ids) : perChunk(part, ids));
    }
    const all = pieces.length === 0 ? torch.zeros([withEntropy ? 2 : 1, 0], { dtype, device: logits.device }) : torch.cat(pieces, 1);
    const logProbs = all.select(0, 0).reshape(rows, width);
    return withEntropy ? { logProbs, entropy: all.select(0, 1).reshape(rows, width) } : { logProbs };
  });
}

/** Entropy of softmax(logits) along the last dim, computed in f32 (f64 for f64 input): [..., V] -> [...]. */
export function entropyFromLogits(logits: Tensor): Tensor {
  return torch.tidy(() => {
    const logp = logits.to({ dtype: computeDtype(logits) }).logSoftmax(-1);
    return logp.exp().mul(logp).sum(-1).neg();
  });
}
