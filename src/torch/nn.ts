/**
 * Neural-network functions (PyTorch's torch.nn.functional), imported as `F`:
 *
 *   import { F } from "../torch/index.ts";
 *   const h = F.silu(F.linear(x, w1)).mul(F.linear(x, w3));
 */
import { ARGS_PTR, OUT, OUT_PTR, S, argsAt, check, loadTorch } from "./native.ts";
import { TorchError } from "./errors.ts";
import { Tensor, handle, putList, result } from "./tensor.ts";

/** x @ weight.T + bias */
export function linear(x: Tensor, weight: Tensor, bias?: Tensor): Tensor {
  return result(S.vt_linear(x._h, weight._h, handle(bias), OUT_PTR));
}

/** Rows of `weight` picked by integer `ids` (any shape); paddingIdx rows get no gradient. */
export function embedding(ids: Tensor, weight: Tensor, paddingIdx = -1): Tensor {
  return result(S.vt_embedding(ids._h, weight._h, paddingIdx, OUT_PTR));
}

/**
 * RMSNorm as in Hugging Face's Qwen2 / LLaMA: normalise in float32, cast back to the
 * input dtype, then scale by weight.
 */
export function rmsNorm(x: Tensor, weight: Tensor | undefined, eps = 1e-6): Tensor {
  return result(S.vt_rms_norm(x._h, handle(weight), eps, OUT_PTR));
}

/**
 * The residual add that closes one block and the RMSNorm that opens the next:
 * `sum = x + residual`, `normed = rmsNorm(sum, weight, eps)`. One kernel on CUDA when
 * nothing needs gradients (see fusedKernels); two ops otherwise, same values.
 */
export function addRmsNorm(x: Tensor, residual: Tensor, weight: Tensor | undefined, eps = 1e-6): { sum: Tensor; normed: Tensor } {
  check(S.vt_add_rms_norm(x._h, residual._h, handle(weight), eps, OUT_PTR));
  return { sum: new Tensor(OUT[0]!), normed: new Tensor(OUT[1]!) };
}

/**
 * Rotate-half rotary position embedding (Qwen2 / LLaMA / GPT-NeoX layout) of queries and
 * keys in one call: `x * cos + rotateHalf(x) * sin` with rotateHalf(x1, x2) = (-x2, x1).
 *   q:        (..., qHeads, headDim)
 *   k:        (..., kHeads, headDim)
 *   cos, sin: (..., headDim), the leading dims of q and k, broadcast over heads
 * Each product and the sum round to the input dtype, as the composite ops do.
 */
export function rotary(q: Tensor, k: Tensor, cos: Tensor, sin: Tensor): [Tensor, Tensor] {
  check(S.vt_rotary(q._h, k._h, cos._h, sin._h, OUT_PTR));
  return [new Tensor(OUT[0]!), new Tensor(OUT[1]!)];
}

/** silu(gate) * up, the gated MLP's activation (one kernel on CUDA without gradients). */
export function siluMul(gate: Tensor, up: Tensor): Tensor {
  return result(S.vt_silu_mul(gate._h, up._h, OUT_PTR));
}

/**
 * A sampler's greedy pick: per row of `logits` (N, vocab), the index of the maximum (the
 * first one on ties, as argmax) and log softmax(row) there, in float32. On CUDA one kernel
 * reads each row once; elsewhere (or with gradients) float32 log_softmax, gathered.
 * Returns [(N,) int64, (N,) float32].
 */
export function argmaxLogprob(logits: Tensor): [Tensor, Tensor] {
  check(S.vt_argmax_logprob(logits._h, OUT_PTR));
  return [new Tensor(OUT[0]!), new Tensor(OUT[1]!)];
}

/**
 * Decode-step attention over a serving engine's slot KV cache, in one CUDA kernel: writes
 * each row's new key and value at `writeIndex`, then attends over the row's slot from
 * position 0 up to there (causal by construction; no mask, no window).
 *   q:                (B, qHeads, 1, headDim), heads and dims dense within each row
 *   k, v:             (B, kvHeads, 1, headDim), heads and dims dense within each row
 *   cacheK, cacheV:   (tokens, kvHeads, headDim); slot s holds tokens [s * slotTokens, (s + 1) * slotTokens)
 *   writeIndex:       (B,) int64, the flat token row of each row's new position
 *   maxLength:        above every row's new position (it sets how the keys are split
 *                     across blocks; a CUDA graph captures it with its attention window)
 *   rotary:           optional (B, 1, headDim) cos and sin: q and k arrive unrotated and
 *                     the kernel rotates them as `rotary` would (same rounding), the
 *                     cache receiving the rotated key
 * Returns (B, qHeads, 1, headDim), or undefined where the kernel does not apply (CPU, no
 * fused kernels, gradients, a head layout it has no variant for); the caller then rotates
 * (if it asked for that), writes the cache and runs scaledDotProductAttention.
 */
export function slotDecodeAttention(
  q: Tensor,
  k: Tensor,
  v: Tensor,
  cacheK: Tensor,
  cacheV: Tensor,
  writeIndex: Tensor,
  slotTokens: number,
  maxLength: number,
  scale: number,
  rotary?: { cos: Tensor; sin: Tensor },
): Tensor | undefined {
  check(
    S.vt_slot_decode_attention(q._h, k._h, v._h, cacheK._h, cacheV._h, writeIndex._h, handle(rotary?.cos), handle(rotary?.sin), slotTokens, maxLength, scale, OUT_PTR),
  );
  return OUT[0] === 0 ? undefined : new Tensor(OUT[0]!);
}

/**
 * vagen's fused CUDA kernels (RMSNorm, add + RMSNorm, rotary, silu * up) replace
 * composites of several libtorch ops when the inputs are contiguous CUDA tensors and no
 * gradient is needed. `fusedKernels()` says whether this build has them and they are on;
 * `fusedKernels(false)` forces the composite ops (for comparisons and benchmarks).
 */
export function fusedKernels(enabled?: boolean): boolean {
  loadTorch();
  if (enabled !== undefined) S.vt_set_fused_kernels(enabled ? 1 : 0);
  return S.vt_fused_kernels() === 1;
}

/** Layer normalisation over the trailing `normalizedShape` dims. */
export function layerNorm(x: Tensor, normalizedShape: readonly number[], weight?: Tensor, bias?: Tensor, eps = 1e-5): Tensor {
  const n = putList(normalizedShape);
  return result(S.vt_layer_norm(x._h, ARGS_PTR, n, handle(weight), handle(bias), eps, OUT_PTR));
}

export function groupNorm(x: Tensor, numGroups: number, weight?: Tensor, bias?: Tensor, eps = 1e-5): Tensor {
  return result(S.vt_group_norm(x._h, numGroups, handle(weight), handle(bias), eps, OUT_PTR));
}

export function silu(x: Tensor): Tensor {
  return x.silu();
}

export function gelu(x: Tensor, approximate: "none" | "tanh" = "none"): Tensor {
  return x.gelu(approximate);
}

export function relu(x: Tensor): Tensor {
  return x.relu();
}

export function softmax(x: Tensor, dim: number): Tensor {
  return x.softmax(dim);
}

export function logSoftmax(x: Tensor, dim: number): Tensor {
  return x.logSoftmax(dim);
}

export function oneHot(ids: Tensor, numClasses = -1): Tensor {
  return ids.oneHot(numClasses);
}

export interface ConvOptions {
  stride?: number | readonly number[];
  padding?: number | readonly number[];
  dilation?: number | readonly number[];
  groups?: number;
}

function conv(x: Tensor, weight: Tensor, bias: Tensor | undefined, opts: ConvOptions, n: number): Tensor {
  const expand = (v: number | readonly number[] | undefined, dflt: number, what: string): readonly number[] => {
    if (v === undefined) return new Array<number>(n).fill(dflt);
    if (typeof v === "number") return new Array<number>(n).fill(v);
    if (v.length !== n) throw new TorchError(`conv${n}d: ${what} needs ${n} values, got [${v.join(", ")}]`);
    return v;
  };
  putList(expand(opts.stride, 1, "stride"), 0);
  putList(expand(opts.padding, 0, "padding"), n);
  putList(expand(opts.dilation, 1, "dilation"), 2 * n);
  return result(S.vt_conv(x._h, weight._h, handle(bias), argsAt(0), argsAt(n), argsAt(2 * n), n, opts.groups ?? 1, OUT_PTR));
}

export function conv1d(x: Tensor, weight: Tensor, bias?: Tensor, opts: ConvOptions = {}): Tensor {
  return conv(x, weight, bias, opts, 1);
}
export function conv2d(x: Tensor, weight: Tensor, bias?: Tensor, opts: ConvOptions = {}): Tensor {
  return conv(x, weight, bias, opts, 2);
}
/** 3-d convolution, e.g. Qwen2.5-VL's patch embedding over (time, height, width). */
export function conv3d(x: Tensor, weight: Tensor, bias?: Tensor, opts: ConvOptions = {}): Tensor {
  return conv(x, weight, bias, opts, 3);
}

/** Zeroes elements with probability p and rescales the rest by 1/(1-p) when training. */
export function dropout(x: Tensor, p = 0.5, training = true): Tensor {
  return result(S.vt_dropout(x._h, p, training ? 1 : 0, OUT_PTR));
}

export interface CrossEntropyOptions {
  /** Per-class weights. */
  weight?: Tensor;
  /** Targets equal to this are ignored (default -100, like PyTorch). */
  ignoreIndex?: number;
  reduction?: "none" | "mean" | "sum";
  labelSmoothing?: number;
}

const REDUCTION = { none: 0, mean: 1, sum: 2 } as const;

/** Cross entropy of logits [N, C] (or [N, C, ...]) against class ids [N] (or [N, ...]). */
export function crossEntropy(logits: Tensor, target: Tensor, opts: CrossEntropyOptions = {}): Tensor {
  return result(
    S.vt_cross_entropy(logits._h, target._h, handle(opts.weight), REDUCTION[opts.reduction ?? "mean"], opts.ignoreIndex ?? -100, opts.labelSmoothing ?? 0, OUT_PTR),
  );
}

export function mseLoss(input: Tensor, target: Tensor): Tensor {
  return input.sub(target).square().mean();
}

export interface AttentionOptions {
  /** Causal (top-left aligned) masking. */
  isCausal?: boolean;
  /** Bool mask (true = may attend) or float mask added to the scores; broadcastable to [..., L, S]. */
  attnMask?: Tensor;
  /** Defaults to 1/sqrt(head dim). */
  scale?: number;
  dropoutP?: number;
  /** Grouped-query attention: k/v may have fewer heads than q (dim -3). */
  enableGqa?: boolean;
  /** Skip libtorch's fused kernels (for comparisons). */
  forceMath?: boolean;
}

/**
 * softmax(q k^T * scale + mask) v over q [..., H, L, E], k/v [..., H, S, E]. Uses
 * libtorch's fused kernels (flash / memory-efficient / cuDNN) on torch 2.x and an
 * op-by-op implementation with the same semantics on 1.13.
 */
export function scaledDotProductAttention(q: Tensor, k: Tensor, v: Tensor, opts: AttentionOptions = {}): Tensor {
  return result(
    S.vt_sdpa(
      q._h,
      k._h,
      v._h,
      handle(opts.attnMask),
      opts.dropoutP ?? 0,
      opts.isCausal ? 1 : 0,
      opts.scale === undefined ? 0 : 1,
      opts.scale ?? 0,
      opts.enableGqa ? 1 : 0,
      opts.forceMath ? 1 : 0,
      OUT_PTR,
    ),
  );
}

export interface SdpBackends {
  flash: boolean;
  memEfficient: boolean;
  cudnn: boolean;
  math: boolean;
}

/**
 * Reads and changes which kernels scaledDotProductAttention may use on CUDA (PyTorch's
 * torch.backends.cuda.enable_*_sdp). Omitted fields stay as they are.
 */
export function sdpBackends(set: Partial<SdpBackends> = {}): SdpBackends {
  loadTorch();
  const flag = (v: boolean | undefined) => (v === undefined ? -1 : v ? 1 : 0);
  check(S.vt_sdp_backends(flag(set.flash), flag(set.memEfficient), flag(set.cudnn), flag(set.math), OUT_PTR));
  return { flash: OUT[0] === 1, memEfficient: OUT[1] === 1, cudnn: OUT[2] === 1, math: OUT[3] === 1 };
}

/** Pads trailing dims: pad = [left, right] per dim starting from the last. */
export function pad(x: Tensor, padding: readonly number[], mode: "constant" | "reflect" | "replicate" = "constant", value = 0): Tensor {
  const n = putList(padding);
  const code = { constant: 0, reflect: 1, replicate: 2 }[mode];
  return result(S.vt_pad(x._h, ARGS_PTR, n, code, value, OUT_PTR));
}

/** Resizes [N, C, H, W] images. */
export function interpolate(x: Tensor, size: readonly [number, number], mode: "nearest" | "bilinear" | "bicubic" = "bilinear", alignCorners = false): Tensor {
  const code = { nearest: 0, bilinear: 1, bicubic: 2 }[mode];
  return result(S.vt_interpolate(x._h, size[0], size[1], code, alignCorners ? 1 : 0, OUT_PTR));
}
