/**
 * Model weights as a plain name -> Tensor map, loaded from a Hugging Face directory's
 * (possibly sharded) safetensors straight to the target device and dtype. The map is the
 * unit the engine and trainer share: no module objects own parameters.
 */
import { existsSync, readdirSync } from "node:fs";
import { join } from "node:path";
import * as torch from "../torch/index.ts";
import type { DType, Device, Tensor } from "../torch/index.ts";
import { VagenError } from "../core/errors.ts";

export type Weights = Map<string, Tensor>;

export interface LoadWeightsOptions {
  device: Device;
  dtype: DType;
  /** Maps a checkpoint name to the model's canonical name (undefined drops the tensor). */
  rename?: (name: string) => string | undefined;
}

/** Load every tensor of `dir`'s safetensors files (model.safetensors or the sharded index). */
export function loadWeights(dir: string, opts: LoadWeightsOptions): Weights {
  const hasIndex = existsSync(join(dir, "model.safetensors.index.json"));
  const hasSingle = existsSync(join(dir, "model.safetensors"));
  if (!hasIndex && !hasSingle) {
    const found = existsSync(dir) ? readdirSync(dir).filter((f) => f.endsWith(".safetensors")) : [];
    if (found.length === 0) {
      throw new VagenError(`${dir}: no model.safetensors or model.safetensors.index.json`, "vagen loads Hugging Face checkpoints saved as safetensors");
    }
  }
  const raw = torch.safetensors.loadSharded(dir, { device: opts.device, dtype: opts.dtype });
  const out: Weights = new Map();
  for (const [name, t] of raw) {
    const canonical = opts.rename ? opts.rename(name) : name;
    if (canonical === undefined) {
      t.dispose();
      continue;
    }
    out.set(canonical, torch.keep(t));
  }
  return out;
}

/** Look up a weight, with an error that names the checkpoint and the missing key. */
export function requireWeight(weights: Weights, name: string, where: string): Tensor {
  const t = weights.get(name);
  if (!t) throw new VagenError(`${where}: the checkpoint has no tensor "${name}"`, "is this the right model family for this directory?");
  return t;
}

/** Check a weight's shape against what the config implies. */
export function expectShape(t: Tensor, shape: readonly number[], name: string, where: string): void {
  const actual = t.shape;
  if (actual.length !== shape.length || actual.some((d, i) => d !== shape[i])) {
    throw new VagenError(`${where}: tensor "${name}" has shape [${actual.join(", ")}], expected [${shape.join(", ")}] from config.json`);
  }
}

export function disposeWeights(weights: Weights): void {
  for (const t of weights.values()) t.dispose();
  weights.clear();
}
