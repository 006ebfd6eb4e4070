/**
 * `vagen export` of a LoRA run's checkpoint, which holds only the adapter (A and B under
 * PEFT's names): a PEFT adapter folder (adapter_config.json, adapter_model.safetensors),
 * what PEFT's `PeftModel.from_pretrained(base, dir)` loads, or with `--merge` a full
 * model directory whose targeted weights are W + (alpha / r) · B A, which loads like the
 * base and gives base + adapter's logits.
 *
 * alpha is not in the tensors: it comes from the run's config.yaml (`actor.lora_alpha`
 * of `vagen train`, `train.lora_alpha` of `vagen sft`, verl's default 16 when unset).
 */
import { existsSync, readFileSync, writeFileSync } from "node:fs";
import { dirname, join, resolve } from "node:path";
import YAML from "yaml";
import { VagenError } from "../core/errors.ts";
import { LoraAdapter, PEFT_PREFIX, loadModelFamily, peftModuleNamer, type LoraModule } from "../models/index.ts";
import { safetensors, type DType, type Tensor } from "../torch/index.ts";
import * as torch from "../torch/index.ts";
import { LORA_DEFAULTS } from "./lora-config.ts";

/** Whether a checkpoint's weights are a LoRA adapter's (every name a lora_A or lora_B). */
export function isAdapterWeights(weights: ReadonlyMap<string, Tensor>): boolean {
  return weights.size > 0 && [...weights.keys()].every((k) => /\.lora_[AB]\.weight$/.test(k));
}

/** The run's lora_alpha, from the config.yaml above the checkpoint. */
export function loraAlphaOf(checkpoint: string): number {
  let dir = resolve(checkpoint);
  for (let i = 0; i < 4; i++) {
    const cfg = join(dir, "config.yaml");
    if (existsSync(cfg)) {
      const parsed = YAML.parse(readFileSync(cfg, "utf8")) as { actor?: { lora_alpha?: number }; train?: { lora_alpha?: number } } | null;
      const alpha = parsed?.actor?.lora_alpha ?? parsed?.train?.lora_alpha;
      if (alpha !== undefined && !(typeof alpha === "number" && alpha > 0)) throw new VagenError(`${cfg}: key "lora_alpha": got ${JSON.stringify(alpha)}, expected a number > 0`);
      return alpha ?? LORA_DEFAULTS.lora_alpha;
    }
    dir = dirname(dir);
  }
  throw new VagenError(`${checkpoint}: cannot find the run's config.yaml (with the LoRA settings) above it`, "export the checkpoint inside its run folder");
}

/** Decoder layers an adapter's names cover (the largest layer index + 1). */
function layerCount(weights: ReadonlyMap<string, Tensor>): number {
  let n = 0;
  for (const k of weights.keys()) {
    const m = /\.layers\.(\d+)\./.exec(k);
    if (m) n = Math.max(n, Number(m[1]) + 1);
  }
  return n;
}

/**
 * PEFT's target_modules as a regex over module names: the decoder layers' projections
 * only (`model.layers.N.self_attn.q_proj`), never a vision tower's layers of the same name.
 */
export function peftTargetPattern(targets: readonly LoraModule[]): string {
  return `.*\\.layers\\.\\d+\\.(self_attn|mlp)\\.(${targets.join("|")})`;
}

/** adapter_config.json, PEFT's LoraConfig fields. */
export function peftAdapterConfig(adapter: LoraAdapter, baseModel: string): Record<string, unknown> {
  return {
    peft_type: "LORA",
    task_type: "CAUSAL_LM",
    base_model_name_or_path: baseModel,
    r: adapter.settings.rank,
    lora_alpha: adapter.settings.alpha,
    lora_dropout: 0,
    target_modules: peftTargetPattern(adapter.settings.targets),
    bias: "none",
    fan_in_fan_out: false,
    inference_mode: true,
    init_lora_weights: true,
    modules_to_save: null,
    use_rslora: false,
    use_dora: false,
    layers_to_transform: null,
    layers_pattern: null,
    rank_pattern: {},
    alpha_pattern: {},
    revision: null,
  };
}

/**
 * An adapter tensor's key as PEFT loads it over the base's transformers class: vagen's
 * `base_model.model.<module>.lora_A.weight` with the module renamed by the family's namer.
 */
export function peftKey(name: string, moduleName: (path: string) => string): string {
  const m = /^base_model\.model\.(.+)(\.lora_[AB]\.weight)$/.exec(name);
  if (!m) throw new VagenError(`adapter weight "${name}": not a PEFT LoRA key`, "expected base_model.model.<module>.lora_A.weight or .lora_B.weight");
  return `${PEFT_PREFIX}${moduleName(m[1]!)}${m[2]}`;
}

/**
 * Writes the PEFT adapter folder's two files into `dir` (the adapter's tensors, converted
 * to `dtype` if given, under the keys PEFT loads for the base's family).
 */
export function writePeftAdapter(dir: string, adapter: LoraAdapter, baseModel: string, dtype?: DType): void {
  const moduleName = peftModuleNamer(baseModel);
  const converted = new Map([...adapter.weights].map(([k, t]) => [peftKey(k, moduleName), dtype ? torch.tidy(() => t.to(dtype)) : t]));
  try {
    safetensors.save(join(dir, "adapter_model.safetensors"), converted, { format: "pt" });
  } finally {
    if (dtype) for (const t of converted.values()) t.dispose();
  }
  writeFileSync(join(dir, "adapter_config.json"), `${JSON.stringify(peftAdapterConfig(adapter, baseModel), null, 2)}\n`);
}

/**
 * The base model's weights (canonical checkpoint names, as a full run's export writes
 * them) with the adapter merged in, on the CPU in the adapter's dtype; the caller saves
 * and frees them.
 */
export function mergedWeights(base: string, adapter: LoraAdapter): { weights: Map<string, Tensor>; release: () => void } {
  const dtype = adapter.weights.values().next().value!.dtype;
  const family = loadModelFamily(base, { device: "cpu", dtype });
  try {
    const merged = adapter.merged(family.weights);
    const weights = new Map([...family.weights].map(([k, t]) => [k, merged.get(k) ?? t]));
    return {
      weights,
      release: () => {
        for (const t of merged.values()) t.dispose();
        family.dispose();
      },
    };
  } catch (err) {
    family.dispose();
    throw err;
  }
}

/** An adapter over a checkpoint's tensors (they become the adapter's), alpha from the run. */
export function adapterFromCheckpoint(weights: Map<string, Tensor>, alpha: number, where: string): LoraAdapter {
  return LoraAdapter.fromWeights(weights, layerCount(weights), alpha, where);
}
