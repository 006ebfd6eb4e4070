/**
 * The one backward GAE recursion every GAE-style estimator runs (VAGEN main's
 * `_backward_gae`), over packed sequences whose padding sits on the right:
 *
 *   for i = L-1 ... 0, starting with nextValue = 0 and nextAdvantage = 0:
 *     delta_i = r_i + g_i * nextValue - V_i
 *     A_i     = delta_i + g_i * l_i * nextAdvantage
 *     nextValue <- V_i;  nextAdvantage <- A_i
 *
 * g (discount) and l (lambda) are scalars or per-position [N, L] tensors: the bi-level
 * estimators change them at turn boundaries, and a 0 discount restarts the recursion.
 * Padding needs no special case: it holds r = V = 0 and comes before (in reverse order)
 * every real token, so the state is still 0 when the first real token is reached.
 */
import * as torch from "../../torch/index.ts";
import type { Tensor } from "../../torch/index.ts";

/** rewards, values: [N, L]; discount, lambda: number or [N, L]. Returns A: [N, L]. */
export function backwardGae(rewards: Tensor, values: Tensor, discount: Tensor | number, lambda: Tensor | number): Tensor {
  const length = rewards.size(1);
  const r = rewards.unbind(1);
  const v = values.unbind(1);
  const g = typeof discount === "number" ? undefined : discount.unbind(1);
  const trace = typeof discount === "number" && typeof lambda === "number" ? discount * lambda : undefined;
  const gl = trace === undefined ? asTensor(discount, rewards).mul(lambda).unbind(1) : undefined;

  const advantages: Tensor[] = new Array(length);
  let nextValue: Tensor | number = 0;
  let nextAdvantage: Tensor | number = 0;
  for (let i = length - 1; i >= 0; i--) {
    const gi = g ? g[i]! : (discount as number);
    const gli = gl ? gl[i]! : trace!;
    const delta = r[i]!.add(mulScalarOrTensor(nextValue, gi)).sub(v[i]!);
    const advantage = delta.add(mulScalarOrTensor(nextAdvantage, gli));
    advantages[i] = advantage;
    nextValue = v[i]!;
    nextAdvantage = advantage;
  }
  if (length === 0) return torch.zerosLike(rewards);
  return torch.stack(advantages, 1);
}

function mulScalarOrTensor(state: Tensor | number, factor: Tensor | number): Tensor | number {
  if (typeof state === "number") return 0; // the state starts at 0 and 0 * anything = 0
  return state.mul(factor);
}

function asTensor(x: Tensor | number, like: Tensor): Tensor {
  return typeof x === "number" ? torch.fullLike(like, x) : x;
}
