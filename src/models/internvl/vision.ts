/**
 * InternVL's vision side: the InternViT encoder over square tiles, the pixel shuffle and
 * the multimodal projector, as transformers' InternVLVisionModel and
 * InternVLModel.get_image_features compute them:
 *
 *   patches   Conv2d(kernel = stride = patch, with bias) -> (N, gridSide^2, hidden)
 *   tokens    [CLS; patches] + learned absolute position embeddings (one table of
 *             gridSide^2 + 1 rows: every tile is image_size, so none is resampled)
 *   layers    x += lambda_1 * proj(attention(LayerNorm(x)))   full attention within a tile
 *             x += lambda_2 * fc2(gelu(fc1(LayerNorm(x))))
 *   shuffle   the CLS row dropped; each s x s block of patches (s = 1 / downsample_ratio)
 *             becomes one token whose features are the block's patches in row-major order
 *   project   LayerNorm (eps 1e-5), Linear, GELU, Linear -> the language model's width
 *
 *   encode(pixelValues (N, 3, tileSize, tileSize)) -> (N * tokensPerTile, textHidden)
 */
import * as torch from "../../torch/index.ts";
import { F, type Tensor } from "../../torch/index.ts";
import { requireWeight, type Weights } from "../weights.ts";
import type { InternVLConfig } from "./config.ts";

/** nn.LayerNorm's default, which the projector's norm keeps. */
const PROJECTOR_NORM_EPS = 1e-5;

interface Linear {
  weight: Tensor;
  bias?: Tensor;
}

interface VisionLayer {
  normBefore: Linear;
  q: Linear;
  k: Linear;
  v: Linear;
  proj: Linear;
  /** (hidden) layer scales of the attention and MLP branches. */
  lambda1: Tensor;
  lambda2: Tensor;
  normAfter: Linear;
  fc1: Linear;
  fc2: Linear;
}

const linear = (x: Tensor, l: Linear) => F.linear(x, l.weight, l.bias);

export class InternVLVisionTower {
  private readonly patchEmbed: Linear;
  /** (1, 1, hidden) and (1, gridSide^2 + 1, hidden). */
  private readonly clsToken: Tensor;
  private readonly positions: Tensor;
  private readonly layers: VisionLayer[];
  private readonly projectorNorm: Linear;
  private readonly projector1: Linear;
  private readonly projector2: Linear;

  /** Resolves every weight once (update them in place, never by `weights.set`). */
  constructor(
    readonly config: InternVLConfig,
    weights: Weights,
  ) {
    const w = (name: string) => requireWeight(weights, name, "InternVL vision tower");
    const lin = (name: string, bias = true): Linear => ({ weight: w(`${name}.weight`), bias: bias ? w(`${name}.bias`) : undefined });
    const v = config.vision;
    this.patchEmbed = lin("vision_tower.embeddings.patch_embeddings.projection");
    this.clsToken = w("vision_tower.embeddings.cls_token");
    this.positions = w("vision_tower.embeddings.position_embeddings");
    this.layers = Array.from({ length: v.numLayers }, (_, i) => {
      const p = `vision_tower.encoder.layer.${i}`;
      return {
        normBefore: lin(`${p}.layernorm_before`),
        q: lin(`${p}.attention.q_proj`, v.attentionBias),
        k: lin(`${p}.attention.k_proj`, v.attentionBias),
        v: lin(`${p}.attention.v_proj`, v.attentionBias),
        proj: lin(`${p}.attention.projection_layer`),
        lambda1: w(`${p}.lambda_1`),
        lambda2: w(`${p}.lambda_2`),
        normAfter: lin(`${p}.layernorm_after`),
        fc1: lin(`${p}.mlp.fc1`),
        fc2: lin(`${p}.mlp.fc2`),
      };
    });
    this.projectorNorm = lin("multi_modal_projector.layer_norm");
    this.projector1 = lin("multi_modal_projector.linear_1");
    this.projector2 = lin("multi_modal_projector.linear_2");
  }

  /** Tiles (N, 3, tileSize, tileSize) -> image features (N * tokensPerTile, textHidden), tiles in order. */
  encode(pixelValues: Tensor): Tensor {
    const v = this.config.vision;
    const shape = pixelValues.shape;
    if (shape.length !== 4 || shape[1] !== v.numChannels || shape[2] !== v.imageSize || shape[3] !== v.imageSize) {
      throw new Error(`InternVL vision tower: pixel values of shape [${shape.join(", ")}], expected [tiles, ${v.numChannels}, ${v.imageSize}, ${v.imageSize}]`);
    }
    const n = shape[0]!;
    let x = torch.tidy(() => {
      const dtype = this.patchEmbed.weight.dtype;
      const patches = F.conv2d(pixelValues.to(dtype), this.patchEmbed.weight, this.patchEmbed.bias, { stride: v.patchSize });
      const tokens = patches.flatten(2).transpose(1, 2); // (N, gridSide^2, hidden)
      return torch.cat([this.clsToken.expand(n, 1, v.hiddenSize), tokens], 1).add(this.positions);
    });
    for (const layer of this.layers) {
      using layerIn = x;
      x = torch.tidy(() => this.layer(layer, layerIn));
    }
    using encoded = x;
    return torch.tidy(() => this.project(this.pixelShuffle(encoded.narrow(1, 1, v.gridSide ** 2))));
  }

  private layer(l: VisionLayer, x: Tensor): Tensor {
    const v = this.config.vision;
    const eps = v.layerNormEps;
    const [n, L] = [x.shape[0]!, x.shape[1]!];
    const h = F.layerNorm(x, [v.hiddenSize], l.normBefore.weight, l.normBefore.bias, eps);
    const heads = (t: Tensor) => t.view(n, L, v.numHeads, v.headDim).transpose(1, 2);
    const attended = F.scaledDotProductAttention(heads(linear(h, l.q)), heads(linear(h, l.k)), heads(linear(h, l.v)), { scale: v.headDim ** -0.5 });
    const mid = x.add(linear(attended.transpose(1, 2).reshape([n, L, v.hiddenSize]), l.proj).mul(l.lambda1));
    const m = F.layerNorm(mid, [v.hiddenSize], l.normAfter.weight, l.normAfter.bias, eps);
    return mid.add(linear(F.gelu(linear(m, l.fc1)), l.fc2).mul(l.lambda2));
  }

  /** (N, gridSide^2, hidden) -> (N * (gridSide / s)^2, s^2 * hidden): each s x s block of patches, row-major, as one token. */
  private pixelShuffle(patches: Tensor): Tensor {
    const { gridSide, hiddenSize } = this.config.vision;
    const s = this.config.shuffle;
    const n = patches.shape[0]!;
    const side = gridSide / s;
    return patches
      .reshape([n, side, s, side, s, hiddenSize])
      .permute(0, 1, 3, 2, 4, 5)
      .reshape([n * side * side, s * s * hiddenSize]);
  }

  private project(merged: Tensor): Tensor {
    const normed = F.layerNorm(merged, [merged.shape[1]!], this.projectorNorm.weight, this.projectorNorm.bias, PROJECTOR_NORM_EPS);
    return linear(F.gelu(linear(normed, this.projector1)), this.projector2);
  }
}
