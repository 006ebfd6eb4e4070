/** Small building blocks shared by Qwen2.5-VL's vision tower and language model. */
import * as torch from "../../torch/index.ts";
import { F, type Tensor } from "../../torch/index.ts";

/** Qwen2 RMSNorm: normalise in float32, cast back, then scale (transformers' order). */
export function rmsNorm(x: Tensor, weight: Tensor, eps: number): Tensor {
  return F.rmsNorm(x, weight, eps);
}

/** (x1, x2) -> (-x2, x1) over the last dimension's halves. */
export function rotateHalf(x: Tensor): Tensor {
  const d = x.shape[x.shape.length - 1]!;
  const x1 = x.narrow(-1, 0, d / 2);
  const x2 = x.narrow(-1, d / 2, d / 2);
  return torch.cat([x2.neg(), x1], -1);
}
