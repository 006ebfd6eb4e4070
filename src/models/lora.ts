/**
 * LoRA adapters on the shared decoder's linear layers (Hu et al.; PEFT's conventions):
 *
 *   y = W x + (alpha / r) · B (A x)        A: (r, in), B: (out, r)
 *
 * B starts at zero, so a fresh adapter changes nothing; A is drawn from a seeded
 * generator, uniform in ±1/sqrt(in) (PEFT's kaiming_uniform with a = sqrt(5)). The base
 * weights stay where they are and are never copied or merged: the decoder adds the
 * low-rank path after each targeted projection (`apply`), in the engine's no-gradient
 * forward and in the training forward alike, so generation always sees base + adapter and
 * nothing has to be undone after a rollout. `without` runs a forward on the base alone:
 * the reference policy of a LoRA run is the base itself, not a second copy.
 *
 * The adapter is attached to a weight map (`attachAdapter`), as the decoder's packed
 * layers are (decoder.ts): every decoder over that map, the engine's and the trainer's,
 * reads the same adapter. Attach it before an engine runs the model: a CUDA graph of a
 * decode step captures the adapter's kernels (reading A and B where they live, so
 * in-place optimizer updates reach it) and would not see an adapter attached later.
 * Its tensors are named as PEFT saves them over the checkpoint's module names
 * (`base_model.model.model.layers.0.self_attn.q_proj.lora_A.weight`); an export renames
 * them where transformers' class names the decoder otherwise (index.ts, PEFT_MODULE_NAMES).
 */
import * as torch from "../torch/index.ts";
import { F, dims2, type DType, type Device, type Tensor } from "../torch/index.ts";
import { VagenError } from "../core/errors.ts";
import { requireWeight, type Weights } from "./weights.ts";

/** The decoder's linear layers an adapter may target, by their checkpoint (and PEFT) names. */
export const LORA_MODULES = ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj", "gate_up_proj"] as const;
export type LoraModule = (typeof LORA_MODULES)[number];

/** What `all-linear` means: every projection; a checkpoint that fuses gate and up (GLM-4) takes `gate_up_proj` for the two. */
const ALL_LINEAR: readonly LoraModule[] = ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"];

/** PEFT's prefix of a wrapped model's state-dict keys. */
export const PEFT_PREFIX = "base_model.model.";

export interface LoraSettings {
  /** r, the adapter's inner width (> 0). */
  rank: number;
  alpha: number;
  /** The modules adapted in every decoder layer. */
  targets: readonly LoraModule[];
  /** Seeds A's draw. */
  seed: number;
}

/** `all-linear` (every module of LORA_MODULES, as verl and PEFT read it) or a list, as the config gives it. */
export function loraTargets(value: "all-linear" | readonly LoraModule[]): LoraModule[] {
  if (value === "all-linear") return [...ALL_LINEAR];
  return LORA_MODULES.filter((m) => value.includes(m));
}

/**
 * The targets as the checkpoint's projections are stored: where gate and up are one
 * `gate_up_proj` weight (GLM-4), gate_proj with up_proj become gate_up_proj (PEFT's
 * target for such a model; its B is (2 * intermediate, r), gate's rows first); one of them
 * alone cannot be adapted there, and gate_up_proj cannot where the two are separate.
 */
function storedTargets(base: Weights, targets: readonly LoraModule[]): LoraModule[] {
  const fused = base.has(`${loraModulePath(0, "gate_up_proj")}.weight`);
  const gate = targets.includes("gate_proj");
  const up = targets.includes("up_proj");
  if (fused && gate !== up) {
    throw new VagenError(`LoRA target_modules: got ${gate ? "gate_proj" : "up_proj"} without ${gate ? "up_proj" : "gate_proj"}, but this model stores the two as one mlp.gate_up_proj`, "target both (or gate_up_proj, or all-linear)");
  }
  if (!fused && targets.includes("gate_up_proj")) {
    throw new VagenError("LoRA target_modules: got gate_up_proj, but this model stores gate_proj and up_proj apart", "target gate_proj and up_proj");
  }
  if (!fused || !gate) return [...targets];
  return LORA_MODULES.filter((m) => m !== "gate_proj" && m !== "up_proj" && (m === "gate_up_proj" || targets.includes(m)));
}

/** The module's checkpoint path in layer `layer`: `model.layers.0.self_attn.q_proj`. */
export function loraModulePath(layer: number, module: LoraModule): string {
  const block = module === "gate_proj" || module === "up_proj" || module === "down_proj" || module === "gate_up_proj" ? "mlp" : "self_attn";
  return `model.layers.${layer}.${block}.${module}`;
}

/** PEFT's names of a module's A and B. */
export function loraWeightNames(layer: number, module: LoraModule): { a: string; b: string } {
  const p = `${PEFT_PREFIX}${loraModulePath(layer, module)}`;
  return { a: `${p}.lora_A.weight`, b: `${p}.lora_B.weight` };
}

interface LoraPair {
  a: Tensor;
  b: Tensor;
}

export class LoraAdapter {
  /** alpha / r. */
  readonly scale: number;
  /** Off: `apply` returns the base projection (the reference forward, `without`). */
  #enabled = true;

  private constructor(
    readonly settings: Omit<LoraSettings, "seed">,
    /** [layer][module index in LORA_MODULES], undefined where not targeted. */
    private readonly pairs: (LoraPair | undefined)[][],
    /** A and B by PEFT's names: what trains, checkpoints and exports. */
    readonly weights: Map<string, Tensor>,
  ) {
    this.scale = settings.alpha / settings.rank;
  }

  /**
   * A fresh adapter over the `numLayers` decoder layers of `base` (checkpoint names; each
   * module's shape is its base weight's): B zero, A seeded.
   */
  static create(base: Weights, numLayers: number, settings: LoraSettings, opts: { device: Device; dtype: DType }): LoraAdapter {
    if (!Number.isInteger(settings.rank) || settings.rank <= 0) throw new VagenError(`LoRA rank: got ${settings.rank}, expected an integer > 0`);
    if (settings.targets.length === 0) throw new VagenError("LoRA target_modules: got an empty list, expected module names or all-linear");
    const targets = storedTargets(base, settings.targets);
    const gen = new torch.Generator({ seed: settings.seed, device: opts.device });
    const weights = new Map<string, Tensor>();
    try {
      const pairs = Array.from({ length: numLayers }, (_, layer) =>
        LORA_MODULES.map((module) => {
          if (!targets.includes(module)) return undefined;
          const [out, inp] = dims2(requireWeight(base, `${loraModulePath(layer, module)}.weight`, "the LoRA adapter's base"), `${module} weight`);
          const bound = 1 / Math.sqrt(inp);
          const a = torch.keep(torch.tidy(() => torch.rand([settings.rank, inp], { dtype: "f32", device: opts.device, generator: gen }).mul(2 * bound).sub(bound).to(opts.dtype)));
          const b = torch.keep(torch.zeros([out, settings.rank], { dtype: opts.dtype, device: opts.device }));
          const names = loraWeightNames(layer, module);
          weights.set(names.a, a);
          weights.set(names.b, b);
          return { a, b };
        }),
      );
      return new LoraAdapter({ rank: settings.rank, alpha: settings.alpha, targets }, pairs, weights);
    } catch (err) {
      for (const t of weights.values()) t.dispose();
      throw err;
    } finally {
      gen.dispose();
    }
  }

  /**
   * An adapter over tensors by PEFT's names (an exported or checkpointed adapter), for a
   * decoder of `numLayers` layers; rank and targets are read from the tensors. The map's
   * tensors become the adapter's.
   */
  static fromWeights(weights: Map<string, Tensor>, numLayers: number, alpha: number, where: string): LoraAdapter {
    let rank: number | undefined;
    const targets = new Set<LoraModule>();
    const pairs = Array.from({ length: numLayers }, (_, layer) =>
      LORA_MODULES.map((module) => {
        const names = loraWeightNames(layer, module);
        const a = weights.get(names.a);
        const b = weights.get(names.b);
        if (!a && !b) return undefined;
        if (!a || !b) throw new VagenError(`${where}: "${a ? names.b : names.a}" is missing (its ${a ? "A" : "B"} is there)`);
        rank ??= a.shape[0];
        if (a.shape[0] !== rank || b.shape[1] !== rank) throw new VagenError(`${where}: "${names.a}" has shape [${a.shape.join(", ")}], expected rank ${rank} as the other adapters`);
        targets.add(module);
        return { a, b };
      }),
    );
    const known = new Set(pairs.flatMap((row, layer) => row.flatMap((p, m) => (p ? Object.values(loraWeightNames(layer, LORA_MODULES[m]!)) : []))));
    const stray = [...weights.keys()].find((k) => !known.has(k));
    if (stray) throw new VagenError(`${where}: "${stray}" is not a LoRA weight of a ${numLayers}-layer decoder`, "expected names like base_model.model.model.layers.0.self_attn.q_proj.lora_A.weight");
    if (rank === undefined) throw new VagenError(`${where}: holds no LoRA weights`);
    return new LoraAdapter({ rank, alpha, targets: LORA_MODULES.filter((m) => targets.has(m)) }, pairs, weights);
  }

  get enabled(): boolean {
    return this.#enabled;
  }

  /** `y` (the base projection of `x` by layer `layer`'s `module`) plus the low-rank path, when targeted and on. */
  apply(layer: number, module: LoraModule, x: Tensor, y: Tensor): Tensor {
    if (!this.#enabled) return y;
    const pair = this.pairs[layer]?.[LORA_MODULES.indexOf(module)];
    if (pair) return y.add(F.linear(F.linear(x, pair.a), pair.b).mul(this.scale));
    // gate or up of a fused gate_up_proj adapter: its half of B's rows (gate's first)
    const fused = module === "gate_proj" || module === "up_proj" ? this.pairs[layer]?.[LORA_MODULES.indexOf("gate_up_proj")] : undefined;
    if (!fused) return y;
    const half = fused.b.shape[0]! / 2;
    return y.add(F.linear(F.linear(x, fused.a), fused.b.narrow(0, module === "gate_proj" ? 0 : half, half)).mul(this.scale));
  }

  /** Runs `fn` on the base alone (the adapter off), then turns the adapter back on. */
  without<T>(fn: () => T): T {
    const before = this.#enabled;
    this.#enabled = false;
    try {
      return fn();
    } finally {
      this.#enabled = before;
    }
  }

  /**
   * W + scale · B A of every targeted module of `base` (by checkpoint names), as new
   * tensors in the base's dtype, computed in float32: what `vagen export --merge` writes.
   */
  merged(base: Map<string, Tensor>): Map<string, Tensor> {
    const out = new Map<string, Tensor>();
    this.pairs.forEach((row, layer) =>
      row.forEach((pair, m) => {
        if (!pair) return;
        const name = `${loraModulePath(layer, LORA_MODULES[m]!)}.weight`;
        const w = base.get(name);
        if (!w) throw new VagenError(`merging the adapter: the base model lacks "${name}"`);
        out.set(
          name,
          torch.keep(
            torch.tidy(() =>
              w
                .to({ dtype: "f32" })
                .add(pair.b.to({ dtype: "f32" }).matmul(pair.a.to({ dtype: "f32" })).mul(this.scale))
                .to({ dtype: w.dtype }),
            ),
          ),
        );
      }),
    );
    return out;
  }

  dispose(): void {
    for (const t of this.weights.values()) t.dispose();
    this.weights.clear();
  }
}

/** Adapters by the weight map they adapt (as decoder.ts keys its packed layers). */
const adapters = new WeakMap<Weights, LoraAdapter>();

/** Every decoder over `weights` adds this adapter's path from now on (undefined: detach). */
export function attachAdapter(weights: Weights, adapter: LoraAdapter | undefined): void {
  if (adapter) adapters.set(weights, adapter);
  else adapters.delete(weights);
}

/** The adapter attached to `weights`, if any. */
export function adapterOf(weights: Weights): LoraAdapter | undefined {
  return adapters.get(weights);
}
