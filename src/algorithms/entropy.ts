/**
 * Token log-probabilities and entropies from logits, a chunk of tokens at a time.
 *
 * A vocabulary of 150k in float32 is 600 KB per token, so the [B, T, V] float32
 * log-softmax of a whole batch can outgrow the model. Rows of tokens are processed in
 * chunks: each chunk is upcast (bf16/f16 -> f32; f64 stays f64), log-softmaxed, gathered
 * and reduced, so only one chunk's float copy exists at a time. With gradients on, the
 * whole computation is one block with its own backward (torch.customGrad): the forward
 * keeps nothing, and the backward recomputes each chunk's softmax from a detached slice,
 * backpropagates through it and writes the slice's gradient into one gradient of the
 * logits (in the logits' dtype), which then flows into the model's graph in one pass. So
 * backward stays within the same bound, and the graph that produced the logits needs no
 * retaining. The numbers are the direct log_softmax computation's.
 */
import * as torch from "../torch/index.ts";
import type { Tensor } from "../torch/index.ts";
import { neverSampledIndex, withoutNeverSampled } from "../torch/logit-mask.ts";

export interface TokenLogProbOptions {
  /** Tokens per chunk (default 1024). */
  chunkTokens?: number;
  /** Also compute the entropy of each position's distribution (default true). */
  withEntropy?: boolean;
  /** Logits are divided by this before the softmax (the sampling temperature; default 1). */
  temperature?: number;
  /**
   * Ids out of the distribution: their logits are set to NEVER_SAMPLED_LOGIT before the
   * temperature, as the engine's sampler sets the family's vision ids (src/torch/logit-mask.ts), so
   * the log-probs and entropies are those of the distribution the engine samples from.
   * Ids outside the vocabulary are ignored.
   */
  neverSampled?: readonly number[];
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
  const never = opts.neverSampled ?? [];

  return torch.tidy(() => {
    const flatLogits = logits.reshape(-1, vocab); // [N, V]
    const flatTokens = tokens.reshape(-1, 1).to({ dtype: "i64" }); // [N, 1]
    const n = rows * width;
    const outRows = withEntropy ? 2 : 1;
    // One chunk: [n, V] logits -> [2, n] (log-prob, entropy) or [1, n].
    const perChunk = (part: Tensor, ids: Tensor): Tensor => {
      let x = part.to({ dtype });
      // Built per chunk (a few ids), so the backward's recomputation owns its own copy.
      const index = neverSampledIndex(never, vocab, part.device);
      if (index) x = withoutNeverSampled(x, index);
      if (temperature !== 1) x = x.div(temperature);
      const logp = x.logSoftmax(-1);
      const picked = logp.gather(1, ids).squeeze(1);
      if (!withEntropy) return picked.unsqueeze(0);
      const entropy = logp.exp().mul(logp).sum(-1).neg();
      return torch.stack([picked, entropy]);
    };
    const chunks = (): { start: number; len: number }[] => {
      const out: { start: number; len: number }[] = [];
      for (let start = 0; start < n; start += chunk) out.push({ start, len: Math.min(chunk, n - start) });
      return out;
    };
    // [N, V] -> [outRows, N], a chunk at a time
    const forward = (x: Tensor, ids: Tensor): Tensor => {
      if (n === 0) return torch.zeros([outRows, 0], { dtype, device: logits.device });
      return torch.cat(chunks().map(({ start, len }) => torch.tidy(() => perChunk(x.narrow(0, start, len), ids.narrow(0, start, len)))), 1);
    };
    // gradOut [outRows, N] -> grad of x [N, V]: each chunk's softmax is recomputed from a
    // detached slice, so only one chunk's float copy and graph exist at a time
    const backward = (gradOut: Tensor, x: Tensor, ids: Tensor): (Tensor | undefined)[] => {
      const gradX = torch.zerosLike(x);
      for (const { start, len } of chunks()) {
        torch.tidy(() => {
          const part = x.narrow(0, start, len).detach().requiresGrad_(true);
          const y = torch.enableGrad(() => perChunk(part, ids.narrow(0, start, len)));
          const [gradPart] = torch.grad(y, [part], { gradOutputs: [gradOut.narrow(1, start, len)] });
          if (gradPart !== undefined) gradX.narrow(0, start, len).copy_(gradPart);
        });
      }
      return [gradX, undefined];
    };
    const all = torch.isGradEnabled() && logits.requiresGrad ? torch.customGrad(forward, backward, flatLogits, flatTokens) : forward(flatLogits, flatTokens);
    const logProbs = all.select(0, 0).reshape(rows, width);
    return withEntropy ? { logProbs, entropy: all.select(0, 1).reshape(rows, width) } : { logProbs };
  });
}
