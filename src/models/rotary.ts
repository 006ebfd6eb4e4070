/**
 * Rotary tables (rotate-half convention) for a decoder whose positions have one or more
 * axes: ordinary RoPE has one (Qwen3, LLaMA), Qwen2-VL's M-RoPE three (temporal, height,
 * width). Each frequency pair takes its angle from one axis: `sections` says how many
 * consecutive pairs each axis gets, so one axis with all `headDim / 2` pairs is plain
 * RoPE and the same arithmetic serves both (transformers computes them alike too).
 */
import * as torch from "../torch/index.ts";
import type { DType, Tensor } from "../torch/index.ts";

export interface RotaryOptions {
  headDim: number;
  /** Base of the inverse frequencies (config.json `rope_theta`). */
  theta: number;
  /** Frequency pairs per position axis, summing to headDim / 2 (one entry: plain RoPE). */
  sections: readonly number[];
}

/**
 * cos/sin (B, T, headDim) in `dtype` from (axes, B, T) integer positions: angles in
 * float32 as transformers computes them (inv_freq = 1 / theta^(2i / headDim), one
 * product per position and frequency), duplicated over the two halves.
 */
export function rotaryTables(positionIds: Tensor, opts: RotaryOptions, dtype: DType): [Tensor, Tensor] {
  return torch.tidy(() => {
    const { headDim, theta, sections } = opts;
    const device = positionIds.device;
    const exponents = torch.arange(0, headDim, 2, { dtype: "f32", device }).div(headDim);
    const invFreq = exponents.rpow(theta).rdiv(1);
    // (axes, B, T, 1) * (half) -> (axes, B, T, half): the same products as transformers' matmul.
    const freqs = positionIds.to("f32").unsqueeze(-1).mul(invFreq);
    let start = 0;
    const parts = sections.map((size, axis) => {
      const part = freqs.select(0, axis).narrow(-1, start, size);
      start += size;
      return part;
    });
    const picked = parts.length === 1 ? parts[0]! : torch.cat(parts, -1);
    const emb = torch.cat([picked, picked], -1);
    return [emb.cos().to(dtype), emb.sin().to(dtype)];
  });
}
