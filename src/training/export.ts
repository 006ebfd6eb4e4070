/**
 * A checkpoint's actor as a Hugging Face model directory: the base model's config,
 * tokenizer, chat template and processor configs, with the trained weights under the
 * same names, so transformers, `vagen eval` and `vagen serve` load it like the original.
 *
 * The checkpoint may be `checkpoints/step_<N>` (its `actor/` is used), its `actor/`
 * directly, or `best_actor/`. The base model is the run's `model.model_dir` (read from the
 * run's config.yaml) unless given. The directory is written next to its target and
 * renamed into place, so a failed export leaves nothing half-written; the target is
 * checked first (`export-target.ts`): one that holds anything is replaced only with
 * `force`, and the checkpoint or the base model never.
 *
 * A LoRA run's checkpoint holds only the adapter: it exports as a PEFT adapter folder,
 * or with `merge` as the base model with the adapter merged in (export-lora.ts).
 */
import { copyFileSync, existsSync, readdirSync, readFileSync, rmSync, statSync } from "node:fs";
import { dirname, join, resolve } from "node:path";
import YAML from "yaml";
import { VagenError } from "../core/errors.ts";
import { safetensors, type DType, type Tensor } from "../torch/index.ts";
import * as torch from "../torch/index.ts";
import { exportWeightNamer } from "../models/index.ts";
import { adapterFromCheckpoint, isAdapterWeights, loraAlphaOf, mergedWeights, writePeftAdapter } from "./export-lora.ts";
import { checkExportTarget, replaceWithStaged, stagingDirFor } from "./export-target.ts";

/** Files of a model directory other than its weights. */
const MODEL_FILES = [
  "config.json",
  "generation_config.json",
  "tokenizer.json",
  "tokenizer_config.json",
  "special_tokens_map.json",
  "vocab.json",
  "merges.txt",
  "added_tokens.json",
  "chat_template.jinja",
  "chat_template.json",
  "preprocessor_config.json",
  "processor_config.json",
  "video_preprocessor_config.json",
];

/** The directory holding the actor's safetensors within a checkpoint path. */
export function actorWeightsDir(checkpoint: string): string {
  const dir = resolve(checkpoint);
  if (!existsSync(dir)) {
    const root = dirname(dir);
    const kept = existsSync(root) && statSync(root).isDirectory() ? readdirSync(root).filter((n) => /^step_\d+$/.test(n)) : [];
    throw new VagenError(
      `${checkpoint}: no such checkpoint`,
      kept.length ? `the run keeps ${kept.sort((a, b) => Number(a.slice(5)) - Number(b.slice(5))).join(", ")} (older ones are pruned by trainer.keep_checkpoints)` : "pass checkpoints/step_<N>, its actor/ folder, or best_actor/",
    );
  }
  if (!statSync(dir).isDirectory()) throw new VagenError(`${checkpoint}: a file, expected a checkpoint folder`, "pass checkpoints/step_<N>, its actor/ folder, or best_actor/");
  if (existsSync(join(dir, "actor"))) return join(dir, "actor");
  if (readdirSync(dir).some((f) => f.endsWith(".safetensors") && f.startsWith("model"))) return dir;
  throw new VagenError(`${checkpoint}: no actor weights here`, "pass checkpoints/step_<N>, its actor/ folder, or best_actor/");
}

/** The run's base model directory, from the config.yaml of the run the checkpoint belongs to. */
export function baseModelDir(checkpoint: string): string {
  let dir = resolve(checkpoint);
  for (let i = 0; i < 4; i++) {
    const cfg = join(dir, "config.yaml");
    if (existsSync(cfg)) {
      // a train run's config has model.model_dir; a `vagen sft` run's has model_dir at the top
      const parsed = YAML.parse(readFileSync(cfg, "utf8")) as { model?: { model_dir?: string }; model_dir?: string } | null;
      const modelDir = parsed?.model?.model_dir ?? parsed?.model_dir;
      if (modelDir) return modelDir;
    }
    dir = dirname(dir);
  }
  throw new VagenError(`${checkpoint}: cannot find the run's config.yaml (with model.model_dir) above it`, "pass the base model directory with --base");
}

export interface ExportOptions {
  /** The base model directory (default: the run's `model.model_dir`). */
  base?: string;
  /** Convert the weights to this dtype (default: as trained). */
  dtype?: DType;
  /** Replace a target that is a file or a non-empty directory. */
  force?: boolean;
  /** A LoRA checkpoint: write the full model with the adapter merged in, not the adapter folder. */
  merge?: boolean;
}

export function exportCheckpoint(checkpoint: string, out: string, opts: ExportOptions = {}): { out: string; tensors: number } {
  const weightsDir = actorWeightsDir(checkpoint);
  const base = resolve(opts.base ?? baseModelDir(checkpoint));
  if (!existsSync(join(base, "config.json"))) throw new VagenError(`${base}: not a model directory (no config.json)`);
  checkExportTarget(
    out,
    [
      { path: checkpoint, what: "the checkpoint" },
      { path: weightsDir, what: "the checkpoint's actor weights" },
      { path: base, what: "the base model" },
    ],
    opts.force ?? false,
  );
  const target = resolve(out);
  const weights: Map<string, Tensor> = existsSync(join(weightsDir, safetensors.INDEX_FILE)) ? safetensors.loadSharded(weightsDir) : safetensors.load(join(weightsDir, "model.safetensors"));
  let tmp: string | undefined;
  try {
    tmp = stagingDirFor(target);
    // The critic's head never belongs to the policy.
    for (const name of [...weights.keys()]) if (name.startsWith("value_head.")) weights.get(name)!.dispose(), weights.delete(name);
    if (isAdapterWeights(weights)) {
      const adapter = adapterFromCheckpoint(weights, loraAlphaOf(checkpoint), weightsDir);
      if (!opts.merge) {
        writePeftAdapter(tmp, adapter, base, opts.dtype);
        replaceWithStaged(tmp, target);
        return { out: target, tensors: weights.size };
      }
      const merged = mergedWeights(base, adapter);
      try {
        stageModelDir(tmp, merged.weights, base, opts.dtype);
      } finally {
        merged.release();
      }
      replaceWithStaged(tmp, target);
      return { out: target, tensors: merged.weights.size };
    }
    stageModelDir(tmp, weights, base, opts.dtype);
    replaceWithStaged(tmp, target);
    return { out: target, tensors: weights.size };
  } catch (err) {
    if (tmp !== undefined) rmSync(tmp, { recursive: true, force: true });
    throw err;
  } finally {
    for (const t of weights.values()) t.dispose();
  }
}

/**
 * A policy's full weights as they stand in memory (not a LoRA adapter's) as a model directory at `out`,
 * beside the base model's other files; written aside and renamed into place, replacing
 * what `out` held. For a look at a model mid-training (the demo's warm-start probe).
 */
export function writeModelDir(weights: ReadonlyMap<string, Tensor>, base: string, out: string): string {
  const target = resolve(out);
  const tmp = stagingDirFor(target);
  try {
    stageModelDir(tmp, weights, base);
    replaceWithStaged(tmp, target);
  } catch (err) {
    rmSync(tmp, { recursive: true, force: true });
    throw err;
  }
  return target;
}

/** `weights` under transformers' names and the base model's other files, in `dir`. */
function stageModelDir(dir: string, weights: ReadonlyMap<string, Tensor>, base: string, dtype?: DType): void {
  saveWeights(dir, weights, exportWeightNamer(base), dtype);
  for (const file of MODEL_FILES) if (existsSync(join(base, file))) copyFileSync(join(base, file), join(dir, file));
}

/** Sharded safetensors of `weights` in `dir` under the names transformers loads (`name`), converted to `dtype` if given. */
function saveWeights(dir: string, weights: ReadonlyMap<string, Tensor>, name: (vagenName: string) => string, dtype?: DType): void {
  const converted = dtype ? new Map([...weights].map(([k, t]) => [k, torch.tidy(() => t.to(dtype))])) : weights;
  try {
    safetensors.saveSharded(dir, new Map([...converted].map(([k, t]) => [name(k), t])), { metadata: { format: "pt" } });
  } finally {
    if (converted !== weights) for (const t of converted.values()) t.dispose();
  }
}
