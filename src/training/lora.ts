/**
 * LoRA in a training run: the adapter created over a loaded family's weights and attached
 * to them, so the engine's rollouts and the training forward both run base + adapter,
 * and released with the family. Shared by `vagen train` (models.ts) and `vagen sft`.
 */
import { LoraAdapter, adapterOf, attachAdapter, type LoraSettings, type ModelFamily } from "../models/index.ts";

/** A fresh adapter (B zero, A seeded) over every decoder layer of `family`, attached to its weights. */
export function attachNewAdapter(family: ModelFamily, settings: LoraSettings): LoraAdapter {
  const adapter = LoraAdapter.create(family.weights, family.spec.numLayers, settings, { device: family.device, dtype: family.dtype });
  attachAdapter(family.weights, adapter);
  return adapter;
}

/** Detaches and frees the adapter attached to `family`'s weights, if any (before the family itself goes). */
export function releaseAdapter(family: ModelFamily): void {
  const adapter = adapterOf(family.weights);
  if (!adapter) return;
  attachAdapter(family.weights, undefined);
  adapter.dispose();
}
