/**
 * The critic's value head: one linear map from the last hidden state to a scalar per
 * token. Family-independent; its two tensors live in the model's weight map under
 * `value_head.weight` / `value_head.bias` so checkpoints carry them.
 */
import * as torch from "../torch/index.ts";
import { F, type DType, type Device, type Tensor } from "../torch/index.ts";
import type { Weights } from "./weights.ts";

export class ValueHead {
  constructor(
    /** (1, hidden) */
    readonly weight: Tensor,
    /** (1) */
    readonly bias: Tensor,
  ) {}

  /** A new head: normal(0, std) weight from a seeded generator, zero bias. */
  static init(hidden: number, opts: { device: Device; dtype: DType; seed?: number; std?: number }): ValueHead {
    const gen = new torch.Generator({ seed: opts.seed ?? 0, device: opts.device });
    const weight = torch.tidy(() => torch.randn([1, hidden], { dtype: "f32", device: opts.device, generator: gen }).mul(opts.std ?? 0.02).to(opts.dtype));
    gen.dispose();
    const bias = torch.zeros([1], { dtype: opts.dtype, device: opts.device });
    return new ValueHead(torch.keep(weight), torch.keep(bias));
  }

  /** The head stored in a weight map, or undefined if the checkpoint has none. */
  static fromWeights(weights: Weights): ValueHead | undefined {
    const w = weights.get("value_head.weight") ?? weights.get("score.weight");
    const b = weights.get("value_head.bias") ?? weights.get("score.bias");
    if (!w) return undefined;
    return new ValueHead(w, b ?? torch.keep(torch.zeros([1], { dtype: w.dtype, device: w.device })));
  }

  /** (B, T, hidden) -> (B, T) */
  forward(hidden: Tensor): Tensor {
    return F.linear(hidden, this.weight, this.bias).squeeze(-1);
  }

  /** Entries to store in a weight map / checkpoint. */
  entries(): [string, Tensor][] {
    return [["value_head.weight", this.weight], ["value_head.bias", this.bias]];
  }
}
