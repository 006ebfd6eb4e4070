/**
 * GLM-4V's vision tower (transformers' Glm4vVisionModel):
 *
 *   patch embedding   Conv3d with bias, stride = kernel, computed as the equivalent linear
 *                     map over the processor's flattened patches; then an RMSNorm
 *                     (post_conv_layernorm)
 *   positions         the learned square position table, bicubically resampled at each
 *                     patch centre of its image's grid (vision-layout.ts), added
 *   blocks            RMSNorm, full attention within each image with 2D rotary (half the
 *                     frequency pairs from the patch row, half from the column,
 *                     rotate-half), RMSNorm, gated SiLU MLP without biases
 *   head              RMSNorm (post_layernorm); each merge x merge block of patches through
 *                     the downsample Conv2d (kernel = stride = merge) to out_hidden_size;
 *                     the merger: Linear, LayerNorm, GELU, then a gated SiLU MLP
 *
 *   encode(pixelValues (numPatches, C * temporalPatch * patch^2), gridThw)
 *     -> (numPatches / merge^2, out_hidden_size) image features
 */
import * as torch from "../../torch/index.ts";
import { F, dims2, type Tensor } from "../../torch/index.ts";
import { requireWeight, type Weights } from "../weights.ts";
import type { Glm4vVisionConfig } from "./config.ts";
import { visionLayout } from "./vision-layout.ts";
import { disposeSegmentLayout, segmentAttention, segmentLayout, type SegmentLayout } from "../segment-attention.ts";

/** transformers' nn.LayerNorm default, which the merger's post_projection_norm keeps. */
const MERGER_NORM_EPS = 1e-5;

interface Linear {
  weight: Tensor;
  bias?: Tensor;
}

interface GatedMlp {
  gate: Tensor;
  up: Tensor;
  down: Tensor;
}

interface VisionBlock {
  norm1: Tensor;
  /** q, k and v in one projection, as the checkpoint stores them. */
  qkv: Linear;
  proj: Tensor;
  norm2: Tensor;
  mlp: GatedMlp;
}

const linear = (x: Tensor, l: Linear) => F.linear(x, l.weight, l.bias);
const gatedMlp = (x: Tensor, m: GatedMlp) => F.linear(F.siluMul(F.linear(x, m.gate), F.linear(x, m.up)), m.down);

export class Glm4vVisionTower {
  /** (hidden, C * temporalPatch * patch^2): the Conv3d kernel, flattened, and its bias. */
  private readonly patchEmbed: Linear;
  private readonly postConvNorm: Tensor;
  private readonly positionTable: Tensor;
  private readonly blocks: VisionBlock[];
  private readonly postNorm: Tensor;
  /** (out, hidden * merge^2): the Conv2d kernel, flattened in (channel, row, column) order. */
  private readonly downsample: Linear;
  private readonly merger: { proj: Tensor; norm: Linear; mlp: GatedMlp };

  /** Resolves every weight once (update them in place, never by `weights.set`). */
  constructor(
    readonly config: Glm4vVisionConfig,
    weights: Weights,
  ) {
    const w = (name: string) => requireWeight(weights, `visual.${name}`, "GLM-4V vision tower");
    const mlp = (p: string): GatedMlp => ({ gate: w(`${p}.gate_proj.weight`), up: w(`${p}.up_proj.weight`), down: w(`${p}.down_proj.weight`) });
    this.patchEmbed = { weight: w("patch_embed.proj.weight"), bias: w("patch_embed.proj.bias") };
    this.postConvNorm = w("post_conv_layernorm.weight");
    this.positionTable = w("embeddings.position_embedding.weight");
    this.blocks = Array.from({ length: config.depth }, (_, i) => {
      const p = `blocks.${i}`;
      return {
        norm1: w(`${p}.norm1.weight`),
        qkv: { weight: w(`${p}.attn.qkv.weight`), bias: config.attentionBias ? w(`${p}.attn.qkv.bias`) : undefined },
        proj: w(`${p}.attn.proj.weight`),
        norm2: w(`${p}.norm2.weight`),
        mlp: mlp(`${p}.mlp`),
      };
    });
    this.postNorm = w("post_layernorm.weight");
    this.downsample = { weight: w("downsample.weight"), bias: w("downsample.bias") };
    this.merger = {
      proj: w("merger.proj.weight"),
      norm: { weight: w("merger.post_projection_norm.weight"), bias: w("merger.post_projection_norm.bias") },
      mlp: mlp("merger"),
    };
  }

  /**
   * pixelValues: (numPatches, C * temporalPatch * patch^2) from the image processor, all
   * images concatenated; gridThw: per image [t, h, w] in patches. Features in the
   * processor's order.
   */
  encode(pixelValues: Tensor, gridThw: readonly (readonly number[])[]): Tensor {
    const c = this.config;
    const [n] = dims2(pixelValues, "vision tower pixel values");
    const expected = gridThw.reduce((s, g) => s + g[0]! * g[1]! * g[2]!, 0);
    if (n !== expected) {
      throw new Error(`vision tower: ${n} patches given but the image grids ${JSON.stringify(gridThw)} need ${expected}`);
    }
    const layout = visionLayout(gridThw, c.spatialMergeSize, c.positionGridSide);
    const device = pixelValues.device;
    const dtype = this.patchEmbed.weight.dtype;
    const eps = c.rmsNormEps;

    let x = torch.tidy(() => {
      // Conv3d(kernel = stride = patch) over a patch == dot product with the flattened kernel.
      const embedded = F.linear(pixelValues.to(dtype), this.patchEmbed.weight.reshape([c.hiddenSize, -1]), this.patchEmbed.bias);
      const normed = F.rmsNorm(embedded, this.postConvNorm, eps);
      // The table is resampled in float32, then added in the compute dtype (as transformers does).
      const taps = torch.tensor(layout.positionTaps, [n, 16], { dtype: "i64", device });
      const weights = torch.tensor(layout.positionWeights, [n, 16, 1], { dtype: "f32", device });
      const positions = F.embedding(taps, this.positionTable.to("f32")).mul(weights).sum(1);
      return normed.add(positions.to(this.positionTable.dtype).to(normed.dtype));
    });
    const [cos, sin] = torch.tidy(() => this.rotaryCosSin(layout.rotaryPositions, layout.maxGridSide, n, device));
    const segments = torch.tidy(() => segmentLayout(layout.frameBounds, n, device));

    this.blocks.forEach((block) => {
      using blockIn = x;
      x = torch.tidy(() => this.block(block, blockIn, cos, sin, segments));
    });
    const features = torch.tidy(() => this.head(x));
    for (const t of [x, cos, sin]) t.dispose();
    disposeSegmentLayout(segments);
    return features;
  }

  /** cos/sin (n, headDim) in float32: half the pairs from the row, half from the column, repeated over the halves. */
  private rotaryCosSin(positions: Int32Array, maxSide: number, n: number, device: string): [Tensor, Tensor] {
    const dim = this.config.headDim / 2;
    const exponents = torch.arange(0, dim, 2, { dtype: "f32", device }).div(dim);
    const invFreq = exponents.rpow(this.config.ropeTheta).rdiv(1);
    const table = torch.arange(0, maxSide, 1, { dtype: "f32", device }).outer(invFreq); // (maxSide, dim/2)
    const pos = torch.tensor(positions, [n, 2], { dtype: "i64", device });
    const freqs = torch.cat([table.indexSelect(0, pos.select(1, 0)), table.indexSelect(0, pos.select(1, 1))], 1); // (n, dim)
    const emb = torch.cat([freqs, freqs], 1); // (n, headDim)
    return [emb.cos(), emb.sin()];
  }

  /** x + attention(norm1(x)), then + mlp(norm2(x)). */
  private block(b: VisionBlock, x: Tensor, cos: Tensor, sin: Tensor, segments: SegmentLayout): Tensor {
    const eps = this.config.rmsNormEps;
    const h = x.add(this.attention(b, F.rmsNorm(x, b.norm1, eps), cos, sin, segments));
    return h.add(gatedMlp(F.rmsNorm(h, b.norm2, eps), b.mlp));
  }

  private attention(b: VisionBlock, x: Tensor, cos: Tensor, sin: Tensor, segments: SegmentLayout): Tensor {
    const c = this.config;
    const [n] = dims2(x, "vision block input");
    const qkv = linear(x, b.qkv).reshape([n, 3, c.numHeads, c.headDim]).permute([1, 0, 2, 3]);
    // Rotary in float32, back to the compute dtype (as transformers does).
    const dtype = x.dtype;
    const cs = cos.unsqueeze(1);
    const sn = sin.unsqueeze(1);
    const rot = (t: Tensor) => {
      const f = t.to("f32");
      return f.mul(cs).add(rotateHalf(f).mul(sn)).to(dtype);
    };
    const scale = c.headDim ** -0.5;
    const out = segmentAttention(rot(qkv.select(0, 0)), rot(qkv.select(0, 1)), qkv.select(0, 2), segments, scale);
    return F.linear(out.reshape([n, c.hiddenSize]), b.proj);
  }

  /** post_layernorm, the downsample conv over each merge x merge block, the merger: (n / merge^2, out). */
  private head(x: Tensor): Tensor {
    const c = this.config;
    const m = c.spatialMergeSize;
    const normed = F.rmsNorm(x, this.postNorm, c.rmsNormEps);
    // (blocks, m, m, hidden) -> (blocks, hidden, m, m): the Conv2d kernel's (in, row, col) order.
    const blocks = normed.reshape([-1, m, m, c.hiddenSize]).permute([0, 3, 1, 2]).reshape([-1, c.hiddenSize * m * m]);
    const down = F.linear(blocks, this.downsample.weight.reshape([c.outHiddenSize, -1]), this.downsample.bias);
    const projected = F.linear(down, this.merger.proj);
    const norm = this.merger.norm;
    const activated = F.gelu(F.layerNorm(projected, [c.outHiddenSize], norm.weight, norm.bias!, MERGER_NORM_EPS));
    return gatedMlp(activated, this.merger.mlp);
  }
}

/** (x1, x2) -> (-x2, x1) over the last dimension's halves. */
function rotateHalf(x: Tensor): Tensor {
  const d = x.shape[x.shape.length - 1]!;
  return torch.cat([x.narrow(-1, d / 2, d / 2).neg(), x.narrow(-1, 0, d / 2)], -1);
}
