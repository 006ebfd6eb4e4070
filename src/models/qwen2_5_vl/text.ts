/**
 * Qwen2.5-VL's language model: token embedding, decoder layers (RMSNorm, grouped-query
 * attention with biased q/k/v and multimodal rotary embeddings, RMSNorm, gated SiLU MLP),
 * final RMSNorm, and the LM head (tied or untied).
 *
 * One path per layer, differentiable and batched:
 *
 *   q, k, v = qkv(norm1(x))                      (B, T, heads | kvHeads, headDim)
 *   x = x + o(attention.attend(q, k, v, rotary)) the backend owns k/v and the mask
 *   x = x + down(silu(gate(norm2(x))) * up(norm2(x)))
 *
 * Each residual add is fused with the RMSNorm after it. Where k/v live and which keys a
 * query sees is the `AttentionBackend`'s business (attention.ts): the engine's slot KV
 * cache, or causal attention over the batch for a training forward.
 */
import * as torch from "../../torch/index.ts";
import { F, dims3, type Tensor } from "../../torch/index.ts";
import { causalAttention, type AttentionBackend } from "../attention.ts";
import { requireWeight, type Weights } from "../weights.ts";
import type { Qwen25VLTextConfig } from "./config.ts";
import { PackedLinear } from "./packed-linear.ts";

export interface DecoderInput {
  /** (B, T, hidden) input embeddings. */
  inputsEmbeds: Tensor;
  /** (3, B, T) integer positions (temporal, height, width). */
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
}

/** One decoder layer's weights, resolved from the weight map once. */
interface DecoderLayer {
  inputNorm: Tensor;
  /** q, k, v projections (biased), packed for inference. */
  qkv: PackedLinear;
  o: Tensor;
  postAttentionNorm: Tensor;
  /** gate and up projections, packed for inference. */
  gateUp: PackedLinear;
  down: Tensor;
}

/** Weight maps already packed, so a second model over the same map reuses the packing. */
const layersOf = new WeakMap<Weights, DecoderLayer[]>();

export class Qwen25TextModel {
  private readonly layers: DecoderLayer[];
  private readonly embedding: Tensor;
  private readonly finalNorm: Tensor;
  private readonly head: Tensor;

  /**
   * Resolves every weight once. q/k/v and gate/up are packed into one tensor each and
   * their entries in `weights` replaced with views into the packed storage: nothing is
   * copied twice and the names still work, so a checkpoint saves the same tensors and an
   * optimizer updating a view in place updates what the packed GEMM reads. The map is
   * read here only: replace a tensor in place (copy_), never by `weights.set`.
   */
  constructor(
    readonly config: Qwen25VLTextConfig,
    private readonly weights: Weights,
  ) {
    const w = (name: string) => requireWeight(weights, name, "Qwen2.5-VL language model");
    this.embedding = w("model.embed_tokens.weight");
    this.finalNorm = w("model.norm.weight");
    this.head = config.tieWordEmbeddings ? this.embedding : w("lm_head.weight");
    this.layers = layersOf.get(weights) ?? this.resolveLayers(w);
    layersOf.set(weights, this.layers);
  }

  private resolveLayers(w: (name: string) => Tensor): DecoderLayer[] {
    return Array.from({ length: this.config.numLayers }, (_, i) => {
      const a = `model.layers.${i}.self_attn`;
      const m = `model.layers.${i}.mlp`;
      return {
        inputNorm: w(`model.layers.${i}.input_layernorm.weight`),
        qkv: PackedLinear.pack(this.weights, [`${a}.q_proj`, `${a}.k_proj`, `${a}.v_proj`], { bias: true }),
        o: w(`${a}.o_proj.weight`),
        postAttentionNorm: w(`model.layers.${i}.post_attention_layernorm.weight`),
        gateUp: PackedLinear.pack(this.weights, [`${m}.gate_proj`, `${m}.up_proj`], { bias: false }),
        down: w(`${m}.down_proj.weight`),
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
  }

  /** (B, T) int64 ids -> (B, T, hidden). */
  embed(inputIds: Tensor): Tensor {
    return F.embedding(inputIds, this.embedding);
  }

  /** Final hidden states (B, T, hidden), after the last RMSNorm. */
  forward(input: DecoderInput): Tensor {
    if (input.attention && input.attentionMask) throw new Error("an attention backend replaces attentionMask; pass only one of them");
    if (input.attention) return this.run(input.inputsEmbeds, input.positionIds, input.attention);
    using attention = causalAttention({ attentionMask: input.attentionMask, forceMath: input.mathAttention });
    return this.run(input.inputsEmbeds, input.positionIds, attention);
  }

  /** (..., vocab) logits; with tied embeddings the head is the embedding matrix. */
  logits(hidden: Tensor): Tensor {
    return F.linear(hidden, this.head);
  }

  private run(inputsEmbeds: Tensor, positionIds: Tensor, attention: AttentionBackend): Tensor {
    const eps = this.config.rmsNormEps;
    const [cos, sin] = torch.tidy(() => this.rotaryCosSin(positionIds, inputsEmbeds.dtype));
    const nextNorm = (i: number) => this.layers[i + 1]?.inputNorm ?? this.finalNorm;
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
        const attn = this.attention(i, layer, normedIn, cos, sin, attention);
        const mid = F.addRmsNorm(attn, residualIn, layer.postAttentionNorm, eps);
        const [gate, up] = layer.gateUp.forward(mid.normed);
        const mlp = F.linear(F.siluMul(gate!, up!), layer.down);
        return F.addRmsNorm(mlp, mid.sum, nextNorm(i), eps);
      }));
    });
    if (residual !== inputsEmbeds) residual.dispose();
    cos.dispose();
    sin.dispose();
    return normed;
  }

  /** q/k/v projections, attention through the backend, output projection: (B, T, hidden). */
  private attention(i: number, layer: DecoderLayer, x: Tensor, cos: Tensor, sin: Tensor, backend: AttentionBackend): Tensor {
    const c = this.config;
    const [B, T] = dims3(x, "decoder input");
    const [q, k, v] = layer.qkv.forward(x);
    const out = backend.attend(i, {
      q: q!.view(B, T, c.numHeads, c.headDim),
      k: k!.view(B, T, c.numKvHeads, c.headDim),
      v: v!.view(B, T, c.numKvHeads, c.headDim),
      cos,
      sin,
    }); // (B, heads, T, headDim)
    return F.linear(out.transpose(1, 2).reshape([B, T, c.numHeads * c.headDim]), layer.o);
  }

  /**
   * cos/sin (B, T, headDim) in the compute dtype (once per forward, not per layer). Each
   * frequency pair takes its angle from the temporal, height or width position according
   * to mrope_section.
   */
  private rotaryCosSin(positionIds: Tensor, dtype: Tensor["dtype"]): [Tensor, Tensor] {
    const c = this.config;
    const device = positionIds.device;
    const exponents = torch.arange(0, c.headDim, 2, { dtype: "f32", device }).div(c.headDim);
    const invFreq = exponents.rpow(c.ropeTheta).rdiv(1);
    // (3, B, T, 1) * (half) -> (3, B, T, half): the same products as transformers' matmul.
    const freqs = positionIds.to("f32").unsqueeze(-1).mul(invFreq);
    const [s0, s1, s2] = c.mropeSection;
    const picked = torch.cat(
      [freqs.select(0, 0).narrow(-1, 0, s0), freqs.select(0, 1).narrow(-1, s0, s1), freqs.select(0, 2).narrow(-1, s0 + s1, s2)],
      -1,
    );
    const emb = torch.cat([picked, picked], -1);
    return [emb.cos().to(dtype), emb.sin().to(dtype)];
  }
}
