/**
 * The projection seam: linear layers that read the same input (q/k/v, gate/up), stored
 * packed in one tensor so inference runs one GEMM where it would run three or two.
 *
 * The checkpoint's named weights become views into the packed storage, so checkpoints
 * and optimizers see the usual names and an in-place update of a view is what the packed
 * GEMM reads. With gradients on, `forward` multiplies by the named views instead: they
 * are the leaves a trainer marks `requiresGrad` (the packed tensor is not), and the
 * outputs are the same numbers either way up to GEMM rounding.
 */
import * as torch from "../torch/index.ts";
import { F, dims2, type Tensor } from "../torch/index.ts";
import { requireWeight, type Weights } from "./weights.ts";

interface Linear {
  weight: Tensor;
  bias?: Tensor;
}

export class PackedLinear {
  /** Output features of each projection, in order. */
  private readonly sizes: number[];

  private constructor(
    /** The packed weight (sum of out features, in features) and bias. */
    private readonly packed: Linear,
    /** Views into `packed`, one per projection, in order. */
    private readonly parts: readonly Linear[],
  ) {
    this.sizes = parts.map((p) => dims2(p.weight, "projection weight")[0]);
  }

  /**
   * Packs `${prefix}.weight` (and `.bias` with `bias: true`) of each prefix, in order, and
   * replaces their entries in `weights` with views into the packed storage.
   */
  static pack(weights: Weights, prefixes: readonly string[], opts: { bias: boolean }): PackedLinear {
    const packInto = (names: string[]): { packed: Tensor; views: Tensor[] } => {
      const sources = names.map((n) => requireWeight(weights, n, "packing projections"));
      const packed = torch.keep(torch.noGrad(() => torch.cat(sources, 0)));
      let row = 0;
      const views = names.map((n, i) => {
        const rows = sources[i]!.shape[0]!; // out features (weights) or their biases' length
        const view = torch.keep(packed.narrow(0, row, rows));
        weights.set(n, view);
        sources[i]!.dispose();
        row += rows;
        return view;
      });
      return { packed, views };
    };
    const w = packInto(prefixes.map((p) => `${p}.weight`));
    const b = opts.bias ? packInto(prefixes.map((p) => `${p}.bias`)) : undefined;
    return new PackedLinear(
      { weight: w.packed, bias: b?.packed },
      w.views.map((weight, i) => ({ weight, bias: b?.views[i] })),
    );
  }

  /** Each projection of x: [(..., out_i)], one GEMM without gradients. */
  forward(x: Tensor): Tensor[] {
    if (torch.isGradEnabled()) return this.parts.map((p) => F.linear(x, p.weight, p.bias));
    const y = F.linear(x, this.packed.weight, this.packed.bias);
    let start = 0;
    return this.sizes.map((size) => {
      const part = y.narrow(-1, start, size);
      start += size;
      return part;
    });
  }

  /** Frees the packed storage (the views are the weight map's). */
  dispose(): void {
    this.packed.weight.dispose();
    this.packed.bias?.dispose();
  }
}
