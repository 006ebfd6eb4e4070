/**
 * Qwen2.5-VL's vision tower: patch embedding (the Conv3d with stride = kernel, computed
 * as the equivalent linear map over the processor's flattened patches), 2D rotary
 * embeddings, blocks of RMSNorm + attention + RMSNorm + gated SiLU MLP where most blocks
 * attend within windows and `fullatt_block_indexes` attend over the whole image, and the
 * 2x2 patch merger (RMSNorm + Linear-GELU-Linear) that yields one LLM token per block.
 *
 * Attention stays within segments (windows, images; src/models/segment-attention.ts):
 * segments of one length attend as one batch, mixed lengths as one batch per length.
 */
import * as torch from "../../torch/index.ts";
import { F, dims2, type Tensor } from "../../torch/index.ts";
import { requireWeight, type Weights } from "../weights.ts";
import type { Qwen25VLVisionConfig } from "./config.ts";
import { visionLayout } from "./vision-layout.ts";
import { disposeSegmentLayout, segmentAttention, segmentLayout, type SegmentLayout } from "../segment-attention.ts";
import { rmsNorm, rotateHalf } from "./layers.ts";

const VISION_NORM_EPS = 1e-6;
const VISION_ROPE_THETA = 10000;

/**
 * Called with each stage's output while encoding, for layer-by-layer comparisons with a
 * reference: `vision.patch_embed` (processor order), `vision.block{i}` and `vision.merger`
 * (window order, as transformers computes them). The tensor is only valid during the call.
 */
export type VisionTrace = (stage: string, value: Tensor) => void;

/** A linear layer's weight (out, in) and, where the checkpoint has one, its bias. */
interface Linear {
  weight: Tensor;
  bias?: Tensor;
}

/** One vision block's weights, resolved from the weight map once. */
interface VisionBlock {
  norm1: Tensor;
  /** q, k and v in one projection, as the checkpoint stores them. */
  qkv: Linear;
  proj: Linear;
  norm2: Tensor;
  gate: Linear;
  up: Linear;
  down: Linear;
}

const linear = (x: Tensor, l: Linear) => F.linear(x, l.weight, l.bias);

export class Qwen25VisionTower {
  /** (hidden, C * temporalPatch * patch^2): the Conv3d kernel, flattened. */
  private readonly patchEmbed: Tensor;
  private readonly blocks: VisionBlock[];
  private readonly merger: { norm: Tensor; fc1: Linear; fc2: Linear };

  /**
   * Resolves every weight once (the same tensors the map holds: update them in place,
   * never by `weights.set`).
   */
  constructor(
    readonly config: Qwen25VLVisionConfig,
    weights: Weights,
  ) {
    const w = (name: string) => requireWeight(weights, `visual.${name}`, "Qwen2.5-VL vision tower");
    const lin = (name: string): Linear => ({ weight: w(`${name}.weight`), bias: weights.get(`visual.${name}.bias`) });
    this.patchEmbed = w("patch_embed.proj.weight");
    this.blocks = Array.from({ length: config.depth }, (_, i) => {
      const p = `blocks.${i}`;
      return {
        norm1: w(`${p}.norm1.weight`),
        qkv: lin(`${p}.attn.qkv`),
        proj: lin(`${p}.attn.proj`),
        norm2: w(`${p}.norm2.weight`),
        gate: lin(`${p}.mlp.gate_proj`),
        up: lin(`${p}.mlp.up_proj`),
        down: lin(`${p}.mlp.down_proj`),
      };
    });
    this.merger = { norm: w("merger.ln_q.weight"), fc1: lin("merger.mlp.0"), fc2: lin("merger.mlp.2") };
  }

  /**
   * pixelValues: (numPatches, C * temporalPatch * patch^2) from the image processor, all
   * images concatenated; gridThw: per image [t, h, w] in patches.
   * Returns (numPatches / merge^2, outHiddenSize) in the processor's order.
   */
  encode(pixelValues: Tensor, gridThw: readonly (readonly number[])[], trace?: VisionTrace): Tensor {
    const c = this.config;
    const unit = c.spatialMergeSize ** 2;
    const layout = visionLayout(gridThw, c);
    const [n] = dims2(pixelValues, "vision tower pixel values");
    const expected = gridThw.reduce((s, g) => s + g[0]! * g[1]! * g[2]!, 0);
    if (n !== expected) {
      throw new Error(`vision tower: ${n} patches given but the image grids ${JSON.stringify(gridThw)} need ${expected}`);
    }
    const device = pixelValues.device;
    const projW = this.patchEmbed;
    const dtype = projW.dtype;

    // Window order: merged blocks regrouped so each window is contiguous.
    const windowIndex = torch.tensor(layout.windowIndex, [layout.windowIndex.length], { dtype: "i64", device });
    // Conv3d(kernel = stride = patch) over a patch == dot product with the flattened kernel.
    let x = torch.tidy(() => {
      const embedded = F.linear(pixelValues.to(dtype), projW.reshape([c.hiddenSize, -1]));
      trace?.("vision.patch_embed", embedded);
      return embedded.reshape([n / unit, unit, c.hiddenSize]).indexSelect(0, windowIndex).reshape([n, c.hiddenSize]);
    });

    const [cos, sin] = torch.tidy(() => this.rotaryCosSin(layout.rotaryPositions, layout.maxGridSide, windowIndex, n, device));
    const windows = torch.tidy(() => segmentLayout(layout.windowSeqlens, n, device));
    // Full attention is per image; the window order keeps each image's patches contiguous
    // and in image order, so the per-image boundaries still apply.
    const images = torch.tidy(() => segmentLayout(layout.fullSeqlens, n, device));

    this.blocks.forEach((block, i) => {
      const segments = c.fullAttentionBlocks.includes(i) ? images : windows;
      using blockIn = x;
      x = torch.tidy(() => this.block(block, blockIn, cos, sin, segments));
      trace?.(`vision.block${i}`, x);
    });

    const reverse = torch.tensor(layout.reverseIndex, [layout.reverseIndex.length], { dtype: "i64", device });
    const out = torch.tidy(() => {
      const merged = this.merge(x);
      trace?.("vision.merger", merged);
      return merged.indexSelect(0, reverse);
    });
    for (const t of [x, reverse, windowIndex, cos, sin]) t.dispose();
    disposeSegmentLayout(windows);
    disposeSegmentLayout(images);
    return out;
  }

  /** cos/sin (n, headDim) in float32, rows in window order. */
  private rotaryCosSin(positions: Int32Array, maxSide: number, windowIndex: Tensor, n: number, device: string): [Tensor, Tensor] {
    const c = this.config;
    const dim = c.headDim / 2;
    const unit = c.spatialMergeSize ** 2;
    // inv_freq = 1 / theta^(2i/dim), computed in float32 like transformers.
    const exponents = torch.arange(0, dim, 2, { dtype: "f32", device }).div(dim);
    const invFreq = exponents.rpow(VISION_ROPE_THETA).rdiv(1);
    const table = torch.arange(0, maxSide, 1, { dtype: "f32", device }).outer(invFreq); // (maxSide, dim/2)
    const pos = torch.tensor(positions, [n, 2], { dtype: "i64", device });
    const rows = table.indexSelect(0, pos.select(1, 0));
    const cols = table.indexSelect(0, pos.select(1, 1));
    let freqs = torch.cat([rows, cols], 1); // (n, dim)
    freqs = freqs.reshape([n / unit, unit, dim]).indexSelect(0, windowIndex).reshape([n, dim]);
    const emb = torch.cat([freqs, freqs], 1); // (n, headDim)
    return [emb.cos(), emb.sin()];
  }

  /** x + attention(norm1(x)), then + down(silu(gate(norm2)) * up(norm2)). */
  private block(b: VisionBlock, x: Tensor, cos: Tensor, sin: Tensor, segments: SegmentLayout): Tensor {
    const h = x.add(this.attention(b, rmsNorm(x, b.norm1, VISION_NORM_EPS), cos, sin, segments));
    const m = rmsNorm(h, b.norm2, VISION_NORM_EPS);
    return h.add(linear(F.siluMul(linear(m, b.gate), linear(m, b.up)), b.down));
  }

  private attention(b: VisionBlock, x: Tensor, cos: Tensor, sin: Tensor, segments: SegmentLayout): Tensor {
    const c = this.config;
    const [n] = dims2(x, "vision block input");
    const qkv = linear(x, b.qkv)
      .reshape([n, 3, c.numHeads, c.headDim])
      .permute([1, 0, 2, 3]);
    // Rotary in float32, back to the compute dtype (as transformers does).
    const dtype = x.dtype;
    const rot = (t: Tensor) => {
      const f = t.to("f32");
      const cs = cos.unsqueeze(1);
      const sn = sin.unsqueeze(1);
      return f.mul(cs).add(rotateHalf(f).mul(sn)).to(dtype);
    };
    const scale = c.headDim ** -0.5;
    const out = segmentAttention(rot(qkv.select(0, 0)), rot(qkv.select(0, 1)), qkv.select(0, 2), segments, scale);
    return linear(out.reshape([n, c.hiddenSize]), b.proj);
  }

  private merge(x: Tensor): Tensor {
    const c = this.config;
    const width = c.hiddenSize * c.spatialMergeSize ** 2;
    const h = rmsNorm(x, this.merger.norm, VISION_NORM_EPS).reshape([-1, width]);
    return linear(F.gelu(linear(h, this.merger.fc1)), this.merger.fc2);
  }
}
