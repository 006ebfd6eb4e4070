/**
 * The decoder-only language model shared by the Qwen families: token embedding, decoder
 * layers (RMSNorm, grouped-query attention with rotary embeddings, RMSNorm, gated SiLU
 * MLP), final RMSNorm, and the LM head (tied or untied). What differs between families is
 * data, not code: whether q/k/v carry biases (Qwen2, Qwen2.5-VL), whether q and k are
 * RMS-normed per head before the rotation (Qwen3), how many position axes the rotary
 * tables read and how (rotary.ts: 1 for RoPE, 3 for M-RoPE, interleaved for Qwen3-VL), and
 * whether a caller adds features to the residual stream after the first layers
 * (`layerResiduals`: Qwen3-VL's deepstack vision features). GLM-4 (GLM-4.1V / 4.6V) adds
 * three more: a rotation over only part of each head, on adjacent pairs of dimensions
 * (`rotaryDim`, `rotaryPairs`), gate and up stored as one `gate_up_proj` (`fusedGateUp`),
 * and "sandwich" norms on each sub-block's output before its residual add (`sandwichNorms`).
 *
 * One path per layer, differentiable and batched:
 *
 *   q, k, v = qkv(norm1(x))                      (B, T, heads | kvHeads, headDim)
 *   q, k = qNorm(q), kNorm(k)                    per head, over headDim (Qwen3 only)
 *   x = x + o(attention.attend(q, k, v, rotary)) the backend owns k/v and the mask
 *   x = x + down(silu(gate(norm2(x))) * up(norm2(x)))
 *
 * (GLM-4's sandwich norms wrap each sub-block's output in one more RMSNorm before its add.)
 *
 * Each residual add is fused with the RMSNorm after it. Where k/v live and which keys a
 * query sees is the `AttentionBackend`'s business (attention.ts): the engine's slot KV
 * cache, or causal attention over the batch for a training forward. Weight names are the
 * Hugging Face checkpoint's (`model.layers.N.self_attn.q_proj.weight`, ...).
 *
 * A LoRA adapter attached to the weight map (lora.ts) adds its low-rank path after each
 * projection it targets, in every forward (engine and training alike); the base weights
 * are never changed for it.
 */
import * as torch from "../torch/index.ts";
import { F, dims3, type Tensor } from "../torch/index.ts";
import { causalAttention, type AttentionBackend } from "./attention.ts";
import { adapterOf, type LoraAdapter, type LoraModule } from "./lora.ts";
import { PackedLinear } from "./packed-linear.ts";
import { rotaryTables } from "./rotary.ts";
import { requireWeight, type Weights } from "./weights.ts";

/** The shapes and options of a decoder, normalised from a family's config.json. */
export interface DecoderConfig {
  vocabSize: number;
  hiddenSize: number;
  intermediateSize: number;
  numLayers: number;
  numHeads: number;
  numKvHeads: number;
  /** Per-head width; q_proj has numHeads * headDim outputs, which need not be hiddenSize. */
  headDim: number;
  rmsNormEps: number;
  ropeTheta: number;
  /** Rotary frequency pairs per position axis (rotary.ts), summing to headDim / 2. */
  ropeSections: readonly number[];
  tieWordEmbeddings: boolean;
  /** q/k/v projections carry biases. */
  qkvBias: boolean;
  /** q and k go through a per-head RMSNorm (`self_attn.q_norm` / `k_norm`) before the rotation. */
  qkNorm: boolean;
  /** Interleaved M-RoPE sections (Qwen3-VL, rotary.ts); default: one block of pairs per axis. */
  ropeInterleaved?: boolean;
  /**
   * Dimensions of each head the rotation covers (GLM-4: headDim * partial_rotary_factor);
   * the rest pass through unrotated. Default: all of headDim.
   */
  rotaryDim?: number;
  /**
   * How the rotated dimensions pair up: "halves" (dimension i with i + rotaryDim / 2, the
   * Qwen / LLaMA layout) or "adjacent" (2i with 2i + 1, GLM-4's). Default "halves".
   */
  rotaryPairs?: "halves" | "adjacent";
  /** gate and up are one `mlp.gate_up_proj` weight (gate rows first), as GLM-4 stores them. */
  fusedGateUp?: boolean;
  /**
   * RMSNorm each sub-block's output before its residual add (`post_self_attn_layernorm`,
   * `post_mlp_layernorm`), as GLM-4 does.
   */
  sandwichNorms?: boolean;
}

export interface DecoderInput {
  /** (B, T, hidden) input embeddings. */
  inputsEmbeds: Tensor;
  /** (axes, B, T) integer positions, one row per rotary axis (ropeSections.length). */
  positionIds: Tensor;
  /**
   * (B, T) with 1 for real tokens and 0 for padding, for the default causal attention.
   * Omitted: every position is real. Exclusive with `attention`.
   */
  attentionMask?: Tensor;
  /** Where attention runs; default: causal attention over the batch (`causalAttention`). */
  attention?: AttentionBackend;
  /** The default attention uses libtorch's math kernels instead of its fused ones. */
  mathAttention?: boolean;
  /**
   * (B, T, hidden) each: entry i is added to the residual stream after layer i (before the
   * next layer's norm), as Qwen3-VL adds its deepstack vision features at image tokens
   * (zero elsewhere). Fewer entries than layers: the later layers get nothing.
   */
  layerResiduals?: readonly Tensor[];
}

/** One decoder layer's weights, resolved from the weight map once. */
interface DecoderLayer {
  inputNorm: Tensor;
  /** q, k, v projections, packed for inference. */
  qkv: PackedLinear;
  /** (headDim) per-head norms of q and k, when the family has them. */
  qNorm?: Tensor;
  kNorm?: Tensor;
  o: Tensor;
  postAttentionNorm: Tensor;
  /** gate and up projections, packed for inference (or the checkpoint's fused weight). */
  gateUp: PackedLinear | FusedGateUp;
  down: Tensor;
  /** Sandwich norms of the attention and MLP outputs, when the family has them. */
  postSelfAttnNorm?: Tensor;
  postMlpNorm?: Tensor;
}

/**
 * gate and up as the checkpoint's one `gate_up_proj` weight (2 * intermediate, hidden):
 * one GEMM, its output split in halves, with and without gradients (the fused tensor is
 * the named leaf a trainer marks, so nothing is repacked and gradients reach it directly).
 */
class FusedGateUp {
  constructor(private readonly weight: Tensor) {}

  forward(x: Tensor): Tensor[] {
    const y = F.linear(x, this.weight);
    const half = this.weight.shape[0]! / 2;
    return [y.narrow(-1, 0, half), y.narrow(-1, half, half)];
  }

  /** The weight is the map's. */
  dispose(): void {}
}

/** Weight maps already packed, so a second model over the same map reuses the packing. */
const layersOf = new WeakMap<Weights, DecoderLayer[]>();

/** The checkpoint names a decoder of this config reads, with their shapes. */
export function decoderWeightShapes(c: DecoderConfig): [string, number[]][] {
  const q = c.numHeads * c.headDim;
  const kv = c.numKvHeads * c.headDim;
  const shapes: [string, number[]][] = [
    ["model.embed_tokens.weight", [c.vocabSize, c.hiddenSize]],
    ["model.norm.weight", [c.hiddenSize]],
  ];
  if (!c.tieWordEmbeddings) shapes.push(["lm_head.weight", [c.vocabSize, c.hiddenSize]]);
  for (let i = 0; i < c.numLayers; i++) {
    const p = `model.layers.${i}`;
    shapes.push(
      [`${p}.self_attn.q_proj.weight`, [q, c.hiddenSize]],
      [`${p}.self_attn.k_proj.weight`, [kv, c.hiddenSize]],
      [`${p}.self_attn.v_proj.weight`, [kv, c.hiddenSize]],
      [`${p}.self_attn.o_proj.weight`, [c.hiddenSize, q]],
      [`${p}.mlp.down_proj.weight`, [c.hiddenSize, c.intermediateSize]],
      [`${p}.input_layernorm.weight`, [c.hiddenSize]],
      [`${p}.post_attention_layernorm.weight`, [c.hiddenSize]],
    );
    if (c.qkvBias) shapes.push([`${p}.self_attn.q_proj.bias`, [q]], [`${p}.self_attn.k_proj.bias`, [kv]], [`${p}.self_attn.v_proj.bias`, [kv]]);
    if (c.qkNorm) shapes.push([`${p}.self_attn.q_norm.weight`, [c.headDim]], [`${p}.self_attn.k_norm.weight`, [c.headDim]]);
    if (c.fusedGateUp) shapes.push([`${p}.mlp.gate_up_proj.weight`, [2 * c.intermediateSize, c.hiddenSize]]);
    else shapes.push([`${p}.mlp.gate_proj.weight`, [c.intermediateSize, c.hiddenSize]], [`${p}.mlp.up_proj.weight`, [c.intermediateSize, c.hiddenSize]]);
    if (c.sandwichNorms) shapes.push([`${p}.post_self_attn_layernorm.weight`, [c.hiddenSize]], [`${p}.post_mlp_layernorm.weight`, [c.hiddenSize]]);
  }
  return shapes;
}

export class Decoder {
  private readonly layers: DecoderLayer[];
  private readonly embedding: Tensor;
  private readonly finalNorm: Tensor;
  private readonly head: Tensor;
  /**
   * (headDim) int64 order of q/k dimensions that puts each rotated pair at (i, i + headDim / 2)
   * and the unrotated dimensions where the tables hold angle 0, so the backends' rotate-half
   * rotation is the family's; undefined when the layout already is rotate-half over headDim.
   */
  private readonly rotaryOrder: Tensor | undefined;

  /**
   * Resolves every weight once. q/k/v and gate/up are packed into one tensor each and
   * their entries in `weights` replaced with views into the packed storage: nothing is
   * copied twice and the names still work, so a checkpoint saves the same tensors and an
   * optimizer updating a view in place updates what the packed GEMM reads. The map is
   * read here only: replace a tensor in place (copy_), never by `weights.set`.
   */
  constructor(
    readonly config: DecoderConfig,
    private readonly weights: Weights,
    /** Names the model in a missing-weight error. */
    where = "language model",
  ) {
    const w = (name: string) => requireWeight(weights, name, where);
    this.embedding = w("model.embed_tokens.weight");
    this.finalNorm = w("model.norm.weight");
    this.head = config.tieWordEmbeddings ? this.embedding : w("lm_head.weight");
    this.layers = layersOf.get(weights) ?? this.resolveLayers(w);
    layersOf.set(weights, this.layers);
    const order = rotaryOrder(config.headDim, config.rotaryDim ?? config.headDim, config.rotaryPairs ?? "halves");
    this.rotaryOrder = order && torch.keep(torch.tensor(order, [order.length], { dtype: "i64", device: this.embedding.device }));
  }

  private resolveLayers(w: (name: string) => Tensor): DecoderLayer[] {
    const { qkvBias, qkNorm, fusedGateUp, sandwichNorms } = this.config;
    return Array.from({ length: this.config.numLayers }, (_, i) => {
      const a = `model.layers.${i}.self_attn`;
      const m = `model.layers.${i}.mlp`;
      return {
        inputNorm: w(`model.layers.${i}.input_layernorm.weight`),
        qkv: PackedLinear.pack(this.weights, [`${a}.q_proj`, `${a}.k_proj`, `${a}.v_proj`], { bias: qkvBias }),
        qNorm: qkNorm ? w(`${a}.q_norm.weight`) : undefined,
        kNorm: qkNorm ? w(`${a}.k_norm.weight`) : undefined,
        o: w(`${a}.o_proj.weight`),
        postAttentionNorm: w(`model.layers.${i}.post_attention_layernorm.weight`),
        gateUp: fusedGateUp ? new FusedGateUp(w(`${m}.gate_up_proj.weight`)) : PackedLinear.pack(this.weights, [`${m}.gate_proj`, `${m}.up_proj`], { bias: false }),
        down: w(`${m}.down_proj.weight`),
        postSelfAttnNorm: sandwichNorms ? w(`model.layers.${i}.post_self_attn_layernorm.weight`) : undefined,
        postMlpNorm: sandwichNorms ? w(`model.layers.${i}.post_mlp_layernorm.weight`) : undefined,
      };
    });
  }

  /** Frees the packed storage (the views in the weight map go with the map). */
  dispose(): void {
    for (const layer of this.layers) {
      layer.qkv.dispose();
      layer.gateUp.dispose();
    }
    this.layers.length = 0;
    layersOf.delete(this.weights);
    this.rotaryOrder?.dispose();
  }

  /** (B, T) int64 ids -> (B, T, hidden). */
  embed(inputIds: Tensor): Tensor {
    return F.embedding(inputIds, this.embedding);
  }

  /** Final hidden states (B, T, hidden), after the last RMSNorm. */
  forward(input: DecoderInput): Tensor {
    if (input.attention && input.attentionMask) throw new Error("an attention backend replaces attentionMask; pass only one of them");
    if (input.attention) return this.run(input.inputsEmbeds, input.positionIds, input.attention, input.layerResiduals);
    using attention = causalAttention({ attentionMask: input.attentionMask, forceMath: input.mathAttention });
    return this.run(input.inputsEmbeds, input.positionIds, attention, input.layerResiduals);
  }

  /** (..., vocab) logits; with tied embeddings the head is the embedding matrix. */
  logits(hidden: Tensor): Tensor {
    return F.linear(hidden, this.head);
  }

  private run(inputsEmbeds: Tensor, positionIds: Tensor, attention: AttentionBackend, layerResiduals?: readonly Tensor[]): Tensor {
    const c = this.config;
    const eps = c.rmsNormEps;
    // Once per forward, not per layer.
    const rotary = { headDim: c.headDim, theta: c.ropeTheta, sections: c.ropeSections, interleaved: c.ropeInterleaved, rotaryDim: c.rotaryDim };
    const [cos, sin] = rotaryTables(positionIds, rotary, inputsEmbeds.dtype);
    const nextNorm = (i: number) => this.layers[i + 1]?.inputNorm ?? this.finalNorm;
    // The LoRA adapter on these weights, if any (switched off for a reference forward).
    const lora = adapterOf(this.weights);
    // The residual stream and its normed copy travel together: each residual add is fused
    // with the RMSNorm after it (the next sub-block's, or the final norm).
    let residual = inputsEmbeds;
    let normed = F.rmsNorm(inputsEmbeds, this.layers[0]!.inputNorm, eps);
    this.layers.forEach((layer, i) => {
      // Each layer's input is only this layer's: its handles go when the layer is done
      // (autograd keeps what backward needs on the libtorch side). The embeddings are the
      // caller's.
      const residualIn = residual;
      using _residual = residualIn === inputsEmbeds ? undefined : residualIn;
      using normedIn = normed;
      ({ sum: residual, normed } = torch.tidy(() => {
        const adapt = adapted(lora, i);
        const attn = this.attention(i, layer, normedIn, cos, sin, attention, adapt);
        const mid = F.addRmsNorm(layer.postSelfAttnNorm ? F.rmsNorm(attn, layer.postSelfAttnNorm, eps) : attn, residualIn, layer.postAttentionNorm, eps);
        const [gate, up] = layer.gateUp.forward(mid.normed);
        const act = F.siluMul(adapt("gate_proj", mid.normed, gate!), adapt("up_proj", mid.normed, up!));
        const down = adapt("down_proj", act, F.linear(act, layer.down));
        const mlp = layer.postMlpNorm ? F.rmsNorm(down, layer.postMlpNorm, eps) : down;
        const out = F.addRmsNorm(mlp, mid.sum, nextNorm(i), eps);
        const extra = layerResiduals?.[i];
        // transformers adds the layer's output first, then the extra features.
        return extra ? F.addRmsNorm(extra.to(out.sum.dtype), out.sum, nextNorm(i), eps) : out;
      }));
    });
    if (residual !== inputsEmbeds) residual.dispose();
    cos.dispose();
    sin.dispose();
    return normed;
  }

  /** q/k/v projections, attention through the backend, output projection: (B, T, hidden). */
  private attention(i: number, layer: DecoderLayer, x: Tensor, cos: Tensor, sin: Tensor, backend: AttentionBackend, adapt: Adapt): Tensor {
    const c = this.config;
    const eps = c.rmsNormEps;
    const [B, T] = dims3(x, "decoder input");
    const [q0, k0, v0] = layer.qkv.forward(x);
    const q = adapt("q_proj", x, q0!);
    const k = adapt("k_proj", x, k0!);
    const v = adapt("v_proj", x, v0!);
    const qHeads = q.view(B, T, c.numHeads, c.headDim);
    const kHeads = k.view(B, T, c.numKvHeads, c.headDim);
    // Per-head norms come before the rotation, as in transformers' Qwen3Attention.
    const qNormed = layer.qNorm ? F.rmsNorm(qHeads, layer.qNorm, eps) : qHeads;
    const kNormed = layer.kNorm ? F.rmsNorm(kHeads, layer.kNorm, eps) : kHeads;
    // q and k in the rotate-half order (the same permutation of both leaves q . k as it was).
    const order = this.rotaryOrder;
    const out = backend.attend(i, {
      q: order ? qNormed.indexSelect(3, order) : qNormed,
      k: order ? kNormed.indexSelect(3, order) : kNormed,
      v: v.view(B, T, c.numKvHeads, c.headDim),
      cos,
      sin,
    }); // (B, heads, T, headDim)
    const heads = out.transpose(1, 2).reshape([B, T, c.numHeads * c.headDim]);
    return adapt("o_proj", heads, F.linear(heads, layer.o));
  }
}

/**
 * The order of head dimensions that turns a rotation of `rotaryDim` dimensions paired as
 * `pairs` into rotate-half over all of headDim: slot i < rotaryDim / 2 takes pair i's first
 * dimension and slot i + headDim / 2 its second; the unrotated dimensions fill the slots
 * between, whose rotary angle is 0 (rotary.ts), so they pass through exactly. Undefined
 * when that order is the identity.
 */
export function rotaryOrder(headDim: number, rotaryDim: number, pairs: "halves" | "adjacent"): Int32Array | undefined {
  if (rotaryDim === headDim && pairs === "halves") return undefined;
  if (rotaryDim % 2 !== 0 || rotaryDim > headDim || headDim % 2 !== 0) {
    throw new Error(`rotary dimension ${rotaryDim} must be even and at most the head dimension ${headDim}`);
  }
  const half = headDim / 2;
  const rotaryHalf = rotaryDim / 2;
  const order = new Int32Array(headDim);
  for (let i = 0; i < rotaryHalf; i++) {
    order[i] = pairs === "adjacent" ? 2 * i : i;
    order[half + i] = pairs === "adjacent" ? 2 * i + 1 : rotaryHalf + i;
  }
  const passHalf = half - rotaryHalf;
  for (let j = 0; j < passHalf; j++) {
    order[rotaryHalf + j] = rotaryDim + j;
    order[half + rotaryHalf + j] = rotaryDim + passHalf + j;
  }
  return order;
}

/** A projection's output `y` of input `x`, with layer i's adapter path added where one applies. */
type Adapt = (module: LoraModule, x: Tensor, y: Tensor) => Tensor;

function adapted(lora: LoraAdapter | undefined, layer: number): Adapt {
  if (!lora?.enabled) return (_module, _x, y) => y;
  return (module, x, y) => lora.apply(layer, module, x, y);
}
