/**
 * Qwen3-VL's vision tower: the patch embedding (a Conv3d with bias, stride = kernel,
 * computed as the equivalent linear map over the processor's flattened patches) plus a
 * learned position table bilinearly resampled to each image's patch grid; 2D rotary
 * embeddings; blocks of LayerNorm + full attention within each image + LayerNorm +
 * GELU(tanh) MLP; the patch merger (LayerNorm, then merge x merge patches concatenated
 * into one token, Linear-GELU-Linear), and one "deepstack" merger per
 * `deepstack_visual_indexes` block (the concatenation first, then its LayerNorm), whose
 * outputs the decoder adds to its hidden states at the image tokens after its first layers.
 *
 *   encode(pixelValues (numPatches, C * temporalPatch * patch^2), gridThw)
 *     -> features (numPatches / merge^2, outHidden) and deepstack[j] of the same shape
 */
import * as torch from "../../torch/index.ts";
import { F, dims2, type Tensor } from "../../torch/index.ts";
import { requireWeight, type Weights } from "../weights.ts";
import type { Qwen3VLVisionConfig } from "./config.ts";
import { visionLayout } from "./vision-layout.ts";
import { disposeSegmentLayout, segmentAttention, segmentLayout, type SegmentLayout } from "../segment-attention.ts";

const VISION_NORM_EPS = 1e-6;

interface Linear {
  weight: Tensor;
  bias: Tensor;
}

interface LayerNorm {
  weight: Tensor;
  bias: Tensor;
}

interface VisionBlock {
  norm1: LayerNorm;
  /** q, k and v in one projection, as the checkpoint stores them. */
  qkv: Linear;
  proj: Linear;
  norm2: LayerNorm;
  fc1: Linear;
  fc2: Linear;
}

interface Merger {
  norm: LayerNorm;
  fc1: Linear;
  fc2: Linear;
}

export interface VisionFeatures {
  /** (numPatches / merge^2, outHidden): what replaces the image-pad embeddings. */
  features: Tensor;
  /** One (numPatches / merge^2, outHidden) per deepstack level, added after decoder layer j. */
  deepstack: Tensor[];
}

const linear = (x: Tensor, l: Linear) => F.linear(x, l.weight, l.bias);
const layerNorm = (x: Tensor, n: LayerNorm) => F.layerNorm(x, [n.weight.shape[0]!], n.weight, n.bias, VISION_NORM_EPS);

export class Qwen3VLVisionTower {
  /** (hidden, C * temporalPatch * patch^2): the Conv3d kernel, flattened, and its bias. */
  private readonly patchEmbed: Linear;
  private readonly positionTable: Tensor;
  private readonly blocks: VisionBlock[];
  private readonly merger: Merger;
  private readonly deepstackMergers: Merger[];

  /** Resolves every weight once (update them in place, never by `weights.set`). */
  constructor(
    readonly config: Qwen3VLVisionConfig,
    weights: Weights,
  ) {
    const w = (name: string) => requireWeight(weights, `visual.${name}`, "Qwen3-VL vision tower");
    const lin = (name: string): Linear => ({ weight: w(`${name}.weight`), bias: w(`${name}.bias`) });
    const merger = (name: string): Merger => ({ norm: lin(`${name}.norm`), fc1: lin(`${name}.linear_fc1`), fc2: lin(`${name}.linear_fc2`) });
    this.patchEmbed = lin("patch_embed.proj");
    this.positionTable = w("pos_embed.weight");
    this.blocks = Array.from({ length: config.depth }, (_, i) => {
      const p = `blocks.${i}`;
      return {
        norm1: lin(`${p}.norm1`),
        qkv: lin(`${p}.attn.qkv`),
        proj: lin(`${p}.attn.proj`),
        norm2: lin(`${p}.norm2`),
        fc1: lin(`${p}.mlp.linear_fc1`),
        fc2: lin(`${p}.mlp.linear_fc2`),
      };
    });
    this.merger = merger("merger");
    this.deepstackMergers = config.deepstackIndexes.map((_, j) => merger(`deepstack_merger_list.${j}`));
  }

  /**
   * pixelValues: (numPatches, C * temporalPatch * patch^2) from the image processor, all
   * images concatenated; gridThw: per image [t, h, w] in patches. Outputs in the
   * processor's order.
   */
  encode(pixelValues: Tensor, gridThw: readonly (readonly number[])[]): VisionFeatures {
    const c = this.config;
    const [n] = dims2(pixelValues, "vision tower pixel values");
    const expected = gridThw.reduce((s, g) => s + g[0]! * g[1]! * g[2]!, 0);
    if (n !== expected) {
      throw new Error(`vision tower: ${n} patches given but the image grids ${JSON.stringify(gridThw)} need ${expected}`);
    }
    const layout = visionLayout(gridThw, c.spatialMergeSize, c.positionGridSide);
    const device = pixelValues.device;
    const dtype = this.patchEmbed.weight.dtype;

    let x = torch.tidy(() => {
      // Conv3d(kernel = stride = patch) over a patch == dot product with the flattened kernel.
      const embedded = F.linear(pixelValues.to(dtype), this.patchEmbed.weight.reshape([c.hiddenSize, -1]), this.patchEmbed.bias);
      const taps = torch.tensor(layout.positionTaps, [n, 4], { dtype: "i64", device });
      const weights = torch.tensor(layout.positionWeights, [n, 4, 1], { dtype: "f32", device });
      const positions = F.embedding(taps, this.positionTable).mul(weights.to(this.positionTable.dtype)).sum(1);
      return embedded.add(positions.to(embedded.dtype));
    });
    const [cos, sin] = torch.tidy(() => this.rotaryCosSin(layout.rotaryPositions, layout.maxGridSide, n, device));
    const frames = torch.tidy(() => segmentLayout(layout.frameBounds, n, device));

    const deepstack: Tensor[] = [];
    this.blocks.forEach((block, i) => {
      using blockIn = x;
      x = torch.tidy(() => this.block(block, blockIn, cos, sin, frames));
      const level = c.deepstackIndexes.indexOf(i);
      if (level >= 0) deepstack.push(torch.tidy(() => this.merge(x, this.deepstackMergers[level]!, true)));
    });
    const features = torch.tidy(() => this.merge(x, this.merger, false));
    for (const t of [x, cos, sin]) t.dispose();
    disposeSegmentLayout(frames);
    return { features, deepstack };
  }

  /** cos/sin (n, headDim) in float32: half the pairs from the row, half from the column. */
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

  /** x + attention(norm1(x)), then + fc2(gelu_tanh(fc1(norm2(x)))). */
  private block(b: VisionBlock, x: Tensor, cos: Tensor, sin: Tensor, segments: SegmentLayout): Tensor {
    const h = x.add(this.attention(b, layerNorm(x, b.norm1), cos, sin, segments));
    return h.add(linear(F.gelu(linear(layerNorm(h, b.norm2), b.fc1), "tanh"), b.fc2));
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
    return linear(out.reshape([n, c.hiddenSize]), b.proj);
  }

  /** merge x merge patches into one token: LayerNorm before the concatenation (the main merger) or after (deepstack). */
  private merge(x: Tensor, m: Merger, normAfterConcat: boolean): Tensor {
    const width = this.config.hiddenSize * this.config.spatialMergeSize ** 2;
    const h = normAfterConcat ? layerNorm(x.reshape([-1, width]), m.norm) : layerNorm(x, m.norm).reshape([-1, width]);
    return linear(F.gelu(linear(h, m.fc1)), m.fc2);
  }
}

/** (x1, x2) -> (-x2, x1) over the last dimension's halves. */
function rotateHalf(x: Tensor): Tensor {
  const d = x.shape[x.shape.length - 1]!;
  return torch.cat([x.narrow(-1, d / 2, d / 2).neg(), x.narrow(-1, 0, d / 2)], -1);
}
