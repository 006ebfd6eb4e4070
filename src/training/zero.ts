/**
 * ZeRO stages 1 and 2 for data-parallel runs (`trainer.zero_stage`): each rank keeps
 * AdamW's state (moments, f32 master copies) for its share of the parameters only, so the
 * optimizer's memory is divided by the number of ranks; stage 2 keeps only that share's
 * reduced gradients too.
 *
 *   gradients   summed over the ranks; stage 1 keeps them whole on every rank, stage 2
 *               only the owned parameters' (each bucket reduce-scattered to its owners;
 *               the others are freed once flattened)
 *   clip        over the whole gradient, the same on every rank (stage 2: the squared
 *               norms of the shares summed over the ranks)
 *   step        each rank steps the parameters it owns
 *   parameters  each is broadcast from its owner, so every rank holds the whole model
 *
 * Parameters are dealt to ranks by size within each gradient bucket, largest first, each
 * to the rank with the fewest elements so far. A checkpoint holds the whole state in the layout of an unsharded
 * AdamW over all parameters (gathered from the owners when it is written), so it resumes
 * on any number of ranks.
 */
import * as torch from "../torch/index.ts";
import type { Tensor } from "../torch/index.ts";
import type { RankContext } from "./ranks.ts";
import { sumOverRanks } from "./data-parallel.ts";
import { DEFAULT_BUCKET_BYTES, gradientBuckets } from "../torch/distributed.ts";

/**
 * owner[i]: the rank that steps parameter i. Within each bucket (all parameters as one
 * when none are given), largest first, each to the rank with the fewest of the bucket's
 * elements so far, then the fewest overall: a bucket's reduce-scatter pads every rank's
 * segment to the largest, so even segments waste least, and a parameter alone in its
 * bucket goes to the least loaded rank.
 */
export function partitionParameters(sizes: readonly number[], world: number, buckets: readonly (readonly number[])[] = [sizes.map((_, i) => i)]): number[] {
  const load = new Array<number>(world).fill(0);
  const owner = new Array<number>(sizes.length).fill(0);
  for (const bucket of buckets) {
    const inBucket = new Array<number>(world).fill(0);
    const order = [...bucket].sort((a, b) => sizes[b]! - sizes[a]! || a - b);
    for (const i of order) {
      let best = 0;
      for (let r = 1; r < world; r++) if (inBucket[r]! < inBucket[best]! || (inBucket[r] === inBucket[best] && load[r]! < load[best]!)) best = r;
      owner[i] = best;
      inBucket[best]! += sizes[i]!;
      load[best]! += sizes[i]!;
    }
  }
  return owner;
}

/** The dtype AdamW keeps a parameter's moments in (f32 for 16-bit parameters, as its f32 state does). */
function momentDtype(p: Tensor): Tensor["dtype"] {
  return p.dtype === "bf16" || p.dtype === "f16" ? "f32" : p.dtype;
}

type OptimizerState = { tensors: Record<string, Tensor>; metadata: Record<string, string> };

/** The parameters' sharding over the ranks and the collectives that tie the shares together. */
export class ZeroShards {
  readonly owner: number[];
  /** Global index -> index in this rank's optimizer (undefined where another rank owns it). */
  readonly local: (number | undefined)[];

  constructor(
    readonly params: readonly Tensor[],
    readonly ranks: RankContext,
  ) {
    // dealt within the gradient reducer's buckets (one for all without buckets: ddp_bucket_mb 0)
    const bucketBytes = ranks.bucketBytes ?? DEFAULT_BUCKET_BYTES;
    const buckets = bucketBytes > 0 ? gradientBuckets(params, bucketBytes) : undefined;
    this.owner = partitionParameters(params.map((p) => p.numel()), ranks.world, buckets);
    let next = 0;
    this.local = this.owner.map((r) => (r === ranks.rank ? next++ : undefined));
  }

  /** The parameters this rank steps, in global order. */
  owned(): Tensor[] {
    return this.params.filter((_, i) => this.owner[i] === this.ranks.rank);
  }

  /** Stage 2 after a whole-gradient all-reduce: frees the gradients of parameters other ranks step. */
  dropForeignGradients(): void {
    this.params.forEach((p, i) => {
      if (this.owner[i] === this.ranks.rank) return;
      p.grad?.dispose();
      p.grad = undefined;
    });
  }

  /**
   * Stage 2's clip_grad_norm: the 2-norm of the whole gradient from each rank's share
   * (each owned gradient's norm in f32, their squares summed in f64, then over the ranks), and the owned
   * gradients scaled by min(1, maxNorm / (norm + 1e-6)) as torch's clip_grad_norm_ does.
   * Every rank gets the same norm. Returns it.
   */
  clipShardedGradients(maxNorm: number): number {
    const grads = this.owned().flatMap((p) => (p.grad ? [p.grad] : []));
    try {
      // each gradient's norm accumulated in f32 as the unsharded clip does (no f64 copy of
      // a gradient: those all lived until the tidy ended, 16 bytes a parameter), the squares
      // summed in f64
      const local = torch.tidy(() => (grads.length ? torch.stack(grads.map((g) => g.norm(2, undefined, false, { dtype: "f32" }))).to({ dtype: "f64" }).square().sum().item() : 0));
      const norm = Math.sqrt(sumOverRanks(this.ranks, { sq: local }).sq!);
      const coef = Math.min(1, maxNorm / (norm + 1e-6));
      if (Number.isFinite(norm) && coef < 1) torch.noGrad(() => grads.forEach((g) => g.mul_(coef)));
      return norm;
    } finally {
      grads.forEach((g) => g.dispose());
    }
  }

  /** Every parameter from its owner, after the owners stepped. */
  broadcastParameters(): void {
    const group = this.ranks.group;
    if (!group) return;
    torch.noGrad(() => this.params.forEach((p, i) => group.broadcast(p, this.owner[i]!)));
  }

  /**
   * The whole optimizer state from this rank's share: every moment (and master copy)
   * broadcast from its owner, step counts summed; keys and metadata as an unsharded AdamW
   * over all parameters writes them.
   */
  gather(localState: OptimizerState): OptimizerState & { dispose(): void } {
    const group = this.ranks.group!;
    const created: Tensor[] = [];
    const tensors: Record<string, Tensor> = {};
    const localSteps = JSON.parse(localState.metadata.steps ?? "[[]]") as number[][];
    const steps = new Float64Array(this.params.length);
    // which owners hold a master copy (made at a parameter's first step)
    const masters = new Float64Array(this.params.length);
    this.params.forEach((_, i) => {
      const li = this.local[i];
      if (li === undefined) return;
      steps[i] = localSteps[0]?.[li] ?? 0;
      masters[i] = localState.tensors[`0.${li}.master`] ? 1 : 0;
    });
    // on the parameters' device: Gloo reduces host tensors, NCCL device ones
    const flags = torch.tensor(Float64Array.from([...steps, ...masters]), [2 * this.params.length], { dtype: "f64", device: this.params[0]!.device });
    group.allReduce(flags, "sum");
    const summed = torch.tidy(() => flags.to({ device: "cpu" }).toFloat64Array());
    flags.dispose();
    this.params.forEach((p, i) => {
      const li = this.local[i];
      const names = ["exp_avg", "exp_avg_sq", ...(summed[this.params.length + i]! > 0 ? ["master"] : [])];
      for (const name of names) {
        const mine = li === undefined ? undefined : localState.tensors[`0.${li}.${name}`];
        // collectives run on the parameters' device; an offloaded state is in host memory
        const copy = mine && (mine.device === p.device ? mine.clone() : mine.to({ device: p.device }));
        const t = torch.keep(copy ?? torch.zeros(p.shape, { dtype: name === "master" ? "f32" : momentDtype(p), device: p.device }));
        group.broadcast(t, this.owner[i]!);
        created.push(t);
        tensors[`0.${i}.${name}`] = t;
      }
    });
    const metadata = { ...localState.metadata, steps: JSON.stringify([Array.from(summed.subarray(0, this.params.length))]) };
    return { tensors, metadata, dispose: () => created.forEach((t) => t.dispose()) };
  }

  /** This rank's share of a whole (unsharded) state: its parameters' entries, renumbered. */
  select(full: { tensors: Map<string, Tensor> | Record<string, Tensor>; metadata: Record<string, string> }): { tensors: Map<string, Tensor>; metadata: Record<string, string> } {
    const get = (k: string) => (full.tensors instanceof Map ? full.tensors.get(k) : full.tensors[k]);
    const tensors = new Map<string, Tensor>();
    const steps = JSON.parse(full.metadata.steps ?? "[[]]") as number[][];
    const mine: number[] = [];
    this.params.forEach((_, i) => {
      const li = this.local[i];
      if (li === undefined) return;
      for (const name of ["exp_avg", "exp_avg_sq", "master"]) {
        const t = get(`0.${i}.${name}`);
        if (t) tensors.set(`0.${li}.${name}`, t);
      }
      mine.push(steps[0]?.[i] ?? 0);
    });
    return { tensors, metadata: { ...full.metadata, steps: JSON.stringify([mine]) } };
  }
}
