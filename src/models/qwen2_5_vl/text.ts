/**
 * Qwen2.5-VL's language model: token embedding, decoder layers (RMSNorm, grouped-query
 * attention with biased q/k/v and multimodal rotary embeddings, RMSNorm, gated SiLU MLP),
 * final RMSNorm, and the heads on top (tied or untied logits, a scalar value head).
 *
 * Everything is differentiable and batched: `forward` takes embeddings (so the caller can
 * splice image features in), 3D position ids (3, B, T), an optional 0/1 attention mask
 * over all past + current positions (left or right padding), and an optional KV cache,
 * or an attention hook for callers that keep their own cache layout (the serving engine
 * runs this same decoder through one).
 */
import * as torch from "../../torch/index.ts";
import { F, type Tensor } from "../../torch/index.ts";
import type { KVCache } from "../kv-cache.ts";
import type { Weights } from "../weights.ts";
import type { Qwen25VLTextConfig } from "./config.ts";
import { gatedMlp, rmsNorm } from "./layers.ts";

export interface DecoderInput {
  /** (B, T, hidden) input embeddings. */
  inputsEmbeds: Tensor;
  /** (3, B, T) integer positions (temporal, height, width). */
  positionIds: Tensor;
  /**
   * (B, past + T) with 1 for real tokens and 0 for padding. Omitted: every position is
   * real. A query never attends to padding, nor to the future.
   */
  attentionMask?: Tensor;
  kvCache?: KVCache;
  /**
   * Replaces the built-in attention (mask + KV cache + SDPA) for callers that own the
   * cache layout, such as a batched serving engine. Exclusive with attentionMask and
   * kvCache: the hook alone knows what each query may see.
   */
  attention?: AttentionHook;
}

/**
 * Attention over a cache the caller owns. Rows may sit at different positions: the
 * rotary angles come from positionIds, so q and k arrive already rotated and the hook only
 * decides where k/v are stored and which keys each query sees.
 */
export interface AttentionHook {
  /**
   * q: (B, heads, T, headDim); k, v: (B, kvHeads, T, headDim) of the T new positions of
   * each row. Returns (B, heads, T, headDim): the attention output over each row's cached
   * prefix plus its new positions.
   */
  attend(layer: number, q: Tensor, k: Tensor, v: Tensor): Tensor;
  /**
   * Optional: the same with q and k still unrotated and the rotary tables cos, sin
   * (B, T, headDim), for a hook that folds the rotation into its attention kernel.
   * Undefined where it does not: the decoder then rotates and calls `attend`.
   */
  attendRotary?(layer: number, q: Tensor, k: Tensor, v: Tensor, cos: Tensor, sin: Tensor): Tensor | undefined;
}

/**
 * One layer's projections that read the same input, packed into one tensor each so that
 * inference runs one GEMM where it would run three (q, k, v) or two (gate, up).
 */
interface PackedLayer {
  /** (qHeads + 2 kvHeads) * headDim rows: q, then k, then v. */
  qkvWeight: Tensor;
  qkvBias: Tensor;
  /** 2 * intermediate rows: gate, then up. */
  gateUpWeight: Tensor;
}

/** Weight maps already packed, so a second model over the same map reuses the packing. */
const packedMaps = new WeakMap<Weights, PackedLayer[]>();

export class Qwen25TextModel {
  private readonly packed: PackedLayer[];

  /**
   * Packs each layer's q/k/v and gate/up weights into one tensor each and replaces their
   * entries in `weights` with views into the packed storage. Nothing is copied twice and
   * the names still work: a checkpoint saves the same tensors, and whoever updates a view
   * in place (an optimizer) updates what the packed GEMM reads. With gradients on, the
   * forward uses the views (leaves a trainer can mark requiresGrad); without, the packs.
   */
  constructor(
    readonly config: Qwen25VLTextConfig,
    private readonly weights: Weights,
  ) {
    this.packed = packedMaps.get(weights) ?? this.pack();
    packedMaps.set(weights, this.packed);
  }

  private pack(): PackedLayer[] {
    const packInto = (names: string[]): Tensor => {
      const parts = names.map((n) => this.w(n));
      const packed = torch.keep(torch.noGrad(() => torch.cat(parts, 0)));
      let row = 0;
      names.forEach((n, i) => {
        const rows = parts[i]!.shape[0]!;
        this.weights.set(n, torch.keep(packed.narrow(0, row, rows)));
        parts[i]!.dispose();
        row += rows;
      });
      return packed;
    };
    return Array.from({ length: this.config.numLayers }, (_, i) => {
      const a = `model.layers.${i}.self_attn`;
      const m = `model.layers.${i}.mlp`;
      return {
        qkvWeight: packInto([`${a}.q_proj.weight`, `${a}.k_proj.weight`, `${a}.v_proj.weight`]),
        qkvBias: packInto([`${a}.q_proj.bias`, `${a}.k_proj.bias`, `${a}.v_proj.bias`]),
        gateUpWeight: packInto([`${m}.gate_proj.weight`, `${m}.up_proj.weight`]),
      };
    });
  }

  /** Frees the packed storage (the views in the weight map go with the map). */
  dispose(): void {
    for (const p of this.packed) for (const t of [p.qkvWeight, p.qkvBias, p.gateUpWeight]) t.dispose();
    this.packed.length = 0;
    packedMaps.delete(this.weights);
  }

  private w(name: string): Tensor {
    return this.weights.get(name)!;
  }

  /** (B, T) int64 ids -> (B, T, hidden). */
  embed(inputIds: Tensor): Tensor {
    return F.embedding(inputIds, this.w("model.embed_tokens.weight"));
  }

  /** Final hidden states (B, T, hidden), after the last RMSNorm. */
  forward(input: DecoderInput): Tensor {
    const c = this.config;
    const { inputsEmbeds, positionIds, attentionMask, kvCache, attention } = input;
    if (attention && (attentionMask || kvCache)) throw new Error("an attention hook replaces attentionMask and kvCache; pass only one of them");
    const [B, T] = inputsEmbeds.shape as [number, number, number];
    const past = kvCache?.pastLength ?? 0;
    const device = inputsEmbeds.device;
    const [cos, sin] = torch.tidy(() => this.rotaryCosSin(positionIds, inputsEmbeds.dtype));
    const mask = attention ? undefined : torch.tidy(() => decoderMask(attentionMask, B, T, past, device));

    // The residual stream and its normed copy travel together: each residual add is fused
    // with the RMSNorm after it (the next sub-block's, or the final norm).
    const norm = (i: number, which: "input_layernorm" | "post_attention_layernorm") =>
      i < c.numLayers ? this.w(`model.layers.${i}.${which}.weight`) : this.w("model.norm.weight");
    let residual = inputsEmbeds;
    let normed = rmsNorm(inputsEmbeds, norm(0, "input_layernorm"), c.rmsNormEps);
    for (let i = 0; i < c.numLayers; i++) {
      const layerIn = { residual, normed };
      ({ sum: residual, normed } = torch.tidy(() => {
        const attn = this.attention(i, layerIn.normed, cos, sin, { mask, kvCache, hook: attention });
        const mid = F.addRmsNorm(attn, layerIn.residual, norm(i, "post_attention_layernorm"), c.rmsNormEps);
        const mlp = this.mlp(i, mid.normed);
        return F.addRmsNorm(mlp, mid.sum, norm(i + 1, "input_layernorm"), c.rmsNormEps);
      }));
      // Each layer's output is only the next layer's input: free its handles now (autograd
      // keeps what backward needs on the libtorch side).
      if (layerIn.residual !== inputsEmbeds) layerIn.residual.dispose();
      layerIn.normed.dispose();
    }
    if (residual !== inputsEmbeds) residual.dispose();
    const out = normed;
    cos.dispose();
    sin.dispose();
    mask?.dispose();
    return out;
  }

  /** (B, T, vocab) logits; with tied embeddings the head is the embedding matrix. */
  logits(hidden: Tensor): Tensor {
    const head = this.config.tieWordEmbeddings ? this.w("model.embed_tokens.weight") : this.w("lm_head.weight");
    return F.linear(hidden, head);
  }

  /** down(silu(gate(x)) * up(x)); one GEMM for gate and up when no gradient is needed. */
  private mlp(layer: number, x: Tensor): Tensor {
    const prefix = `model.layers.${layer}.mlp`;
    if (torch.isGradEnabled()) return gatedMlp(x, this.weights, prefix);
    const inter = this.config.intermediateSize;
    const gateUp = F.linear(x, this.packed[layer]!.gateUpWeight);
    return F.linear(F.siluMul(gateUp.narrow(-1, 0, inter), gateUp.narrow(-1, inter, inter)), this.w(`${prefix}.down_proj.weight`));
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

  private attention(
    layer: number,
    x: Tensor,
    cos: Tensor,
    sin: Tensor,
    how: { mask?: Tensor; kvCache?: KVCache; hook?: AttentionHook },
  ): Tensor {
    const c = this.config;
    const p = `model.layers.${layer}.self_attn`;
    const [B, T] = x.shape as [number, number, number];
    // (B, T, heads, headDim): rotary works on this layout; attention sees (B, heads, T, headDim) views.
    const qSize = c.numHeads * c.headDim;
    const kvSize = c.numKvHeads * c.headDim;
    let qp: Tensor, kp: Tensor, vp: Tensor;
    if (torch.isGradEnabled()) {
      const proj = (name: string) => F.linear(x, this.w(`${p}.${name}.weight`), this.w(`${p}.${name}.bias`));
      [qp, kp, vp] = [proj("q_proj"), proj("k_proj"), proj("v_proj")];
    } else {
      const qkv = F.linear(x, this.packed[layer]!.qkvWeight, this.packed[layer]!.qkvBias);
      [qp, kp, vp] = [qkv.narrow(-1, 0, qSize), qkv.narrow(-1, qSize, kvSize), qkv.narrow(-1, qSize + kvSize, kvSize)];
    }
    const qh = qp.view(B, T, c.numHeads, c.headDim);
    const kh = kp.view(B, T, c.numKvHeads, c.headDim);
    let v = vp.view(B, T, c.numKvHeads, c.headDim).transpose(1, 2);
    let out = how.hook?.attendRotary?.(layer, qh.transpose(1, 2), kh.transpose(1, 2), v, cos, sin);
    if (out) return this.outProjection(layer, out);
    const [qr, kr] = F.rotary(qh, kh, cos, sin);
    const q = qr.transpose(1, 2);
    let k = kr.transpose(1, 2);
    if (how.hook) {
      out = how.hook.attend(layer, q, k, v);
    } else {
      if (how.kvCache) [k, v] = how.kvCache.update(layer, k, v);
      out = F.scaledDotProductAttention(q, k, v, {
        attnMask: how.mask,
        // Without a mask: causal over a fresh sequence; one new token attends to everything.
        isCausal: !how.mask && T > 1,
        scale: c.headDim ** -0.5,
        enableGqa: c.numKvHeads !== c.numHeads,
      });
    }
    return this.outProjection(layer, out);
  }

  /** (B, heads, T, headDim) attention output -> (B, T, hidden). */
  private outProjection(layer: number, out: Tensor): Tensor {
    const [B, , T] = out.shape as [number, number, number, number];
    const c = this.config;
    return F.linear(out.transpose(1, 2).reshape([B, T, c.numHeads * c.headDim]), this.w(`model.layers.${layer}.self_attn.o_proj.weight`));
  }
}

/**
 * (B, 1, T, past + T) boolean mask: causal, minus padded keys. A query at a padded slot
 * would see no key at all (softmax over nothing is NaN, and NaN leaks through 0 * NaN in
 * later layers), so it attends to itself; its output is never used.
 * Undefined when plain causal attention is enough (no padding, no cache).
 */
export function decoderMask(attentionMask: Tensor | undefined, B: number, T: number, past: number, device: string): Tensor | undefined {
  if (!attentionMask && past === 0) return undefined;
  const S = past + T;
  const keys = torch.arange(0, S, 1, { dtype: "i64", device }).unsqueeze(0); // (1, S)
  const queries = torch.arange(past, S, 1, { dtype: "i64", device }).unsqueeze(1); // (T, 1)
  let allowed = keys.le(queries); // (T, S)
  if (attentionMask) {
    if (attentionMask.shape[0] !== B || attentionMask.shape[1] !== S) {
      throw new Error(`attention mask has shape [${attentionMask.shape.join(", ")}], expected [${B}, ${S}] (batch, past + new tokens)`);
    }
    const valid = attentionMask.ne(0).reshape([B, 1, 1, S]);
    allowed = allowed.unsqueeze(0).unsqueeze(0).logicalAnd(valid).logicalOr(keys.eq(queries));
  } else {
    allowed = allowed.reshape([1, 1, T, S]).expand([B, 1, T, S]);
  }
  return allowed;
}
