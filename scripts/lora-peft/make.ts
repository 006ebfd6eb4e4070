/**
 * The vagen half of the LoRA check against PEFT (by hand, not in CI; docs/training.md's
 * LoRA section has the figures): for each tiny fixture, an adapter on every projection
 * with B drawn, saved as a `vagen train` checkpoint under a run folder, exported as a
 * PEFT adapter folder and as a merged model, with vagen's f32 logits of base + adapter
 * and of the base on a fixed id sequence. Then `python3 scripts/lora-peft/check.py OUT`
 * (with torch, transformers and peft) loads the folders and compares.
 *
 *   bun scripts/lora-peft/make.ts OUT
 */
import { mkdirSync, writeFileSync } from "node:fs";
import { join, resolve } from "node:path";
import { LoraAdapter, attachAdapter, loadModelFamily, loraTargets, type ModelFamily } from "../../src/models/index.ts";
import * as torch from "../../src/torch/index.ts";
import { safetensors } from "../../src/torch/index.ts";
import { exportCheckpoint } from "../../src/training/export.ts";

const out = resolve(process.argv[2] ?? "lora-peft-check");
const fixtures = join(import.meta.dir, "..", "..", "test", "fixtures");
const ids = [[5, 17, 42, 8, 99, 3, 64, 11]];
const logits = (f: ModelFamily) => torch.noGrad(() => torch.tidy(() => Array.from(f.logits(f.forwardForTraining({ inputIds: ids, images: [[]] })).toFloat32Array())));

for (const [name, fixture] of [
  ["qwen3", "qwen3_tiny"],
  ["qwen25vl", "qwen2_5_vl_tiny"],
  ["qwen3vl", "qwen3_vl_tiny"],
  ["internvl", "internvl_tiny"],
  // GLM-4 stores gate and up as one gate_up_proj: all-linear adapts it as one module
  ["glm4v", "glm4v_tiny"],
] as const) {
  const base = join(fixtures, fixture);
  const run = join(out, name, "run");
  const step = join(run, "checkpoints", "step_1");
  mkdirSync(join(step, "actor"), { recursive: true });
  writeFileSync(join(run, "config.yaml"), `model: {model_dir: ${JSON.stringify(base)}}\nactor: {lora_alpha: 8}\n`);
  const family = loadModelFamily(base, { device: "cpu", dtype: "f32" });
  const adapter = LoraAdapter.create(family.weights, family.spec.numLayers, { rank: 4, alpha: 8, targets: loraTargets("all-linear"), seed: 5 }, { device: "cpu", dtype: "f32" });
  const gen = new torch.Generator({ seed: 9, device: "cpu" });
  for (const [k, t] of adapter.weights) if (k.endsWith("lora_B.weight")) torch.noGrad(() => torch.tidy(() => t.copy_(torch.randn(t.shape, { generator: gen }).mul(0.1))));
  gen.dispose();
  attachAdapter(family.weights, adapter);
  const adapted = logits(family);
  const plain = adapter.without(() => logits(family));
  safetensors.saveSharded(join(step, "actor"), adapter.weights);
  exportCheckpoint(step, join(out, name, "peft"), { force: true });
  exportCheckpoint(step, join(out, name, "merged"), { merge: true, force: true });
  writeFileSync(join(out, name, "logits.json"), JSON.stringify({ fixture, ids, logits: adapted, base_logits: plain }));
  attachAdapter(family.weights, undefined);
  adapter.dispose();
  family.dispose();
  console.log(`${name}: ${join(out, name)}`);
}
