/**
 * Group statistics for the outcome estimators (GRPO, RLOO, GiGPO): members are scalars
 * (one per row, trajectory or turn) and groups are named by string keys.
 */
import * as torch from "../../torch/index.ts";
import type { Tensor } from "../../torch/index.ts";
import { indexTensor } from "../trajectory.ts";

export interface Groups {
  /** [members] the group number of each member, numbered by first appearance. */
  of: Int32Array;
  /** [groups] member count. */
  sizes: number[];
  /** [groups] the first member of each group. */
  first: Int32Array;
}

export function groupBy(keys: readonly string[]): Groups {
  const number = new Map<string, number>();
  const of = new Int32Array(keys.length);
  const sizes: number[] = [];
  const first: number[] = [];
  keys.forEach((key, i) => {
    let g = number.get(key);
    if (g === undefined) {
      g = sizes.length;
      number.set(key, g);
      sizes.push(0);
      first.push(i);
    }
    sizes[g]!++;
    of[i] = g;
  });
  return { of, sizes, first: Int32Array.from(first) };
}

export interface GroupStats {
  /** [members] the mean of the member's group. */
  mean: Tensor;
  /** [members] the std of the member's group (population or unbiased; 0 for a singleton). */
  std: Tensor;
  /** [members] 1 when the member's group has at least two members. */
  shared: Tensor;
  /** [members] 1 when every member of the group holds exactly the same value. */
  flat: Tensor;
}

/** scores: [members]. Mean and std per group, gathered back to the members. */
export function groupStats(scores: Tensor, groups: Groups, opts: { unbiased: boolean }): GroupStats {
  const like = { dtype: scores.dtype, device: scores.device };
  const index = indexTensor(groups.of, scores.device);
  const count = groups.sizes.length;
  const sizes = torch.tensor(Float64Array.from(groups.sizes), [count], like);
  const perGroup = (x: Tensor) => torch.zeros([count], like).indexAdd(0, index, x);
  const toMembers = (x: Tensor) => x.indexSelect(0, index);

  const mean = toMembers(perGroup(scores).div(sizes));
  const squares = perGroup(scores.sub(mean).square());
  const dof = opts.unbiased ? sizes.sub(1).clampMin(1) : sizes;
  const std = toMembers(squares.div(dof).sqrt());
  const shared = toMembers(sizes.gt(1).to(scores.dtype));
  // Exact flatness: compare with the group's first member instead of trusting std == 0,
  // which rounding in the mean can break (3 x 0.1 / 3 != 0.1).
  const firstScore = toMembers(scores.indexSelect(0, indexTensor(groups.first, scores.device)));
  const flat = toMembers(perGroup(scores.sub(firstScore).abs()).eq(0).to(scores.dtype));
  return { mean, std, shared, flat };
}
