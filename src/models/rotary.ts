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
  /**
   * Interleaved M-RoPE (Qwen3-VL's `mrope_interleaved`): pair j reads the height axis when
   * j % 3 == 1 and j < 3 * sections[1], the width axis when j % 3 == 2 and j < 3 * sections[2],
   * the temporal axis otherwise. Default: each axis takes its section as one block of pairs.
   */
  interleaved?: boolean;
  /**
   * Dimensions the rotation covers (partial rotary, GLM-4): the inverse frequencies are
   * 1 / theta^(2i / rotaryDim) over rotaryDim / 2 pairs (which `sections` sum to), and the
   * remaining (headDim - rotaryDim) / 2 pairs get angle 0 (cos 1, sin 0: an exact pass).
   * Default: headDim.
   */
  rotaryDim?: number;
}

/** [axis, first pair, pair count] runs covering the headDim / 2 frequency pairs in order. */
function axisRuns(sections: readonly number[], interleaved: boolean): [number, number, number][] {
  if (!interleaved || sections.length !== 3) {
    let start = 0;
    return sections.map((size, axis) => {
      const run: [number, number, number] = [axis, start, size];
      start += size;
      return run;
    });
  }
  const half = sections[0]! + sections[1]! + sections[2]!;
  const runs: [number, number, number][] = [];
  for (let j = 0; j < half; j++) {
    const axis = j % 3 === 1 && j < 3 * sections[1]! ? 1 : j % 3 === 2 && j < 3 * sections[2]! ? 2 : 0;
    const last = runs[runs.length - 1];
    if (last && last[0] === axis) last[2]++;
    else runs.push([axis, j, 1]);
  }
  return runs;
}

/**
 * cos/sin (B, T, headDim) in `dtype` from (axes, B, T) integer positions: angles in
 * float32 as transformers computes them (inv_freq = 1 / theta^(2i / headDim), one
 * product per position and frequency), duplicated over the two halves.
 */
export function rotaryTables(positionIds: Tensor, opts: RotaryOptions, dtype: DType): [Tensor, Tensor] {
  return torch.tidy(() => {
    const { headDim, theta, sections, interleaved = false, rotaryDim = headDim } = opts;
    const device = positionIds.device;
    const exponents = torch.arange(0, rotaryDim, 2, { dtype: "f32", device }).div(rotaryDim);
    const invFreq = exponents.rpow(theta).rdiv(1);
    // (axes, B, T, 1) * (half) -> (axes, B, T, half): the same products as transformers' matmul.
    const freqs = positionIds.to("f32").unsqueeze(-1).mul(invFreq);
    const parts = axisRuns(sections, interleaved).map(([axis, start, size]) => freqs.select(0, axis).narrow(-1, start, size));
    if (rotaryDim < headDim) parts.push(torch.zeros([...freqs.shape.slice(1, -1), (headDim - rotaryDim) / 2], { dtype: "f32", device }));
    const picked = parts.length === 1 ? parts[0]! : torch.cat(parts, -1);
    const emb = torch.cat([picked, picked], -1);
    return [emb.cos().to(dtype), emb.sin().to(dtype)];
  });
}
