/**
 * A small decoder-only model with random seeded weights that implements the family seam's
 * FamilyDecoder (what the engine runs): Llama-style blocks (RMSNorm, rotary attention with grouped KV heads,
 * SwiGLU MLP), tied LM head, and a toy "vision tower" (a linear map of an image's mean
 * colour plus a per-placeholder embedding) so image handling is exercised too.
 *
 * `referenceLogits` runs the same weights over a whole token sequence without any cache
 * (plain causal attention), which is what the engine's batched and cached paths must
 * reproduce.
 */
import * as torch from "../../src/torch/index.ts";
import { F, type DType, type Device, type Tensor } from "../../src/torch/index.ts";
import { causalAttention, type AttentionBackend } from "../../src/models/attention.ts";
import type { FamilyDecoder, ModelSpec } from "../../src/models/family.ts";
import type { Prompt } from "../../src/models/prompt.ts";

export interface ToyConfig {
  vocabSize: number;
  hiddenSize: number;
  numLayers: number;
  numHeads: number;
  numKvHeads: number;
  intermediateSize: number;
  seed: number;
}

export const TOY_CONFIG: ToyConfig = {
  vocabSize: 64,
  hiddenSize: 32,
  numLayers: 2,
  numHeads: 4,
  numKvHeads: 2,
  intermediateSize: 48,
  seed: 7,
};

interface Layer {
  inputNorm: Tensor;
  wq: Tensor;
  wk: Tensor;
  wv: Tensor;
  wo: Tensor;
  postNorm: Tensor;
  gate: Tensor;
  up: Tensor;
  down: Tensor;
}

export class ToyModel implements FamilyDecoder {
  readonly spec: ModelSpec;
  private readonly embedding: Tensor;
  private readonly layers: Layer[] = [];
  private readonly finalNorm: Tensor;
  private readonly visionProj: Tensor;
  private readonly visionPos: Tensor;
  private readonly invFreq: Tensor;
  /** How many times an image went through the vision tower. */
  visionCalls = 0;

  constructor(
    readonly config: ToyConfig = TOY_CONFIG,
    placement: { device?: Device; dtype?: DType } = {},
  ) {
    const c = config;
    const device = placement.device ?? "cpu";
    const dtype = placement.dtype ?? "f32";
    const headDim = c.hiddenSize / c.numHeads;
    this.spec = {
      numLayers: c.numLayers,
      numHeads: c.numHeads,
      numKvHeads: c.numKvHeads,
      headDim,
      hiddenSize: c.hiddenSize,
      vocabSize: c.vocabSize,
      positionAxes: 1,
      dtype,
      device,
      maxPositions: 4096,
      weightBytes: 0,
    };
    const gen = new torch.Generator({ seed: c.seed });
    // Drawn on the CPU in f32 (the same numbers on every device), then placed.
    const place = (t: Tensor) => torch.keep(torch.tidy(() => t.to({ device, dtype })));
    const w = (rows: number, cols: number, scale = 1 / Math.sqrt(cols)) => place(torch.randn([rows, cols], { generator: gen }).mul(scale));
    const norm = () => place(torch.ones([c.hiddenSize]).add(torch.randn([c.hiddenSize], { generator: gen }).mul(0.1)));
    this.embedding = w(c.vocabSize, c.hiddenSize, 1);
    for (let l = 0; l < c.numLayers; l++) {
      this.layers.push({
        inputNorm: norm(),
        wq: w(c.numHeads * headDim, c.hiddenSize),
        wk: w(c.numKvHeads * headDim, c.hiddenSize),
        wv: w(c.numKvHeads * headDim, c.hiddenSize),
        wo: w(c.hiddenSize, c.numHeads * headDim),
        postNorm: norm(),
        gate: w(c.intermediateSize, c.hiddenSize),
        up: w(c.intermediateSize, c.hiddenSize),
        down: w(c.hiddenSize, c.intermediateSize),
      });
    }
    this.finalNorm = norm();
    this.visionProj = w(c.hiddenSize, 3, 1);
    this.visionPos = w(16, c.hiddenSize, 0.5);
    this.invFreq = torch.keep(
      torch.tensor(Float32Array.from({ length: headDim / 2 }, (_, i) => 1 / 10000 ** ((2 * i) / headDim)), [headDim / 2], { device }),
    );
    gen.dispose();
  }

  promptPositions(prompt: Prompt): number[][] {
    return [prompt.tokenIds.map((_, i) => i)];
  }

  embedPrompt(prompt: Prompt, from: number): Tensor {
    const ids = prompt.tokenIds.slice(from);
    let x = this.embedTokens(torch.tensor(Float64Array.from(ids), [ids.length], { dtype: "i64", device: this.spec.device }));
    for (const image of prompt.images) {
      const lo = Math.max(image.offset, from);
      const hi = image.offset + image.length;
      if (hi <= lo) continue;
      this.visionCalls++;
      const features = this.encodeImage(image.image.data, image.length);
      x = x.clone();
      x.narrow(0, lo - from, hi - lo).copy_(features.narrow(0, lo - image.offset, hi - lo));
    }
    return x;
  }

  embedTokens(ids: Tensor): Tensor {
    return this.embedding.indexSelect(0, ids);
  }

  forward(inputsEmbeds: Tensor, positions: Tensor, attention: AttentionBackend): Tensor {
    const [B, T] = torch.dims3(inputsEmbeds, "toy input embeddings");
    const { numHeads, numKvHeads, headDim } = this.spec;
    const angles = positions.select(0, 0).float().unsqueeze(-1).mul(this.invFreq); // (B, T, D/2)
    const dtype = this.spec.dtype;
    const cos = torch.cat([angles.cos(), angles.cos()], -1).to(dtype); // (B, T, D)
    const sin = torch.cat([angles.sin(), angles.sin()], -1).to(dtype);
    let x = inputsEmbeds;
    this.layers.forEach((layer, l) => {
      const h = F.rmsNorm(x, layer.inputNorm, 1e-6);
      const q = F.linear(h, layer.wq).view(B, T, numHeads, headDim);
      const k = F.linear(h, layer.wk).view(B, T, numKvHeads, headDim);
      const v = F.linear(h, layer.wv).view(B, T, numKvHeads, headDim);
      const a = attention.attend(l, { q, k, v, cos, sin }).transpose(1, 2).reshape(B, T, numHeads * headDim);
      x = x.add(F.linear(a, layer.wo));
      const m = F.rmsNorm(x, layer.postNorm, 1e-6);
      x = x.add(F.linear(F.silu(F.linear(m, layer.gate)).mul(F.linear(m, layer.up)), layer.down));
    });
    return F.rmsNorm(x, this.finalNorm, 1e-6);
  }

  logits(hidden: Tensor): Tensor {
    // Scaled so the next-token distribution is spread out (sampling tests need that).
    return F.linear(hidden, this.embedding).mul(1 / Math.sqrt(this.spec.hiddenSize));
  }

  /** Logits at every position of one sequence, computed without any cache. */
  referenceLogits(prompt: Prompt): Float32Array {
    return torch.tidy(() => {
      const n = prompt.tokenIds.length;
      const embeds = this.embedPrompt(prompt, 0).view(1, n, this.spec.hiddenSize);
      const positions = torch.arange(n, undefined, 1, { dtype: "i64", device: this.spec.device }).view(1, 1, n);
      using attention = causalAttention();
      const hidden = this.forward(embeds, positions, attention);
      return this.logits(hidden.view(n, this.spec.hiddenSize)).float().toFloat32Array();
    });
  }

  dispose(): void {
    for (const l of this.layers) for (const t of Object.values(l)) t.dispose();
    for (const t of [this.embedding, this.finalNorm, this.visionProj, this.visionPos, this.invFreq]) t.dispose();
  }

  private encodeImage(pixels: Uint8Array, tokens: number): Tensor {
    const rgb = torch.tensor(Float32Array.from(pixels), [pixels.length / 3, 3], { device: this.spec.device }).div(255).mean(0); // (3,)
    const base = F.linear(rgb.view(1, 3).to(this.spec.dtype), this.visionProj); // (1, hidden)
    return base.add(this.visionPos.narrow(0, 0, tokens));
  }
}
