/**
 * `vagen export CHECKPOINT --out DIR`: a training checkpoint's actor as a Hugging Face
 * model directory (config, safetensors, tokenizer, chat template, processor config)
 * that transformers, `vagen eval` and `vagen serve` load. DIR must be new or empty unless
 * `--force`; the checkpoint and the base model are never overwritten. A LoRA run's
 * checkpoint exports as a PEFT adapter folder, or with `--merge` as a full model.
 */
import type { Command } from "commander";
import { VagenError } from "../../core/errors.ts";
import { exportCheckpoint } from "../../training/export.ts";

export function register(program: Command): void {
  program
    .command("export")
    .description("write a training checkpoint's actor as a Hugging Face model directory (a LoRA run's: a PEFT adapter folder, or merged with --merge)")
    .argument("<checkpoint>", "checkpoints/step_<N>, its actor/ folder, or best_actor/ of a vagen train run")
    .requiredOption("--out <dir>", "(required) the model directory to write (new or empty)")
    .option("--base <model_dir>", "the base model directory (default: the run's model.model_dir)")
    .option("--dtype <dtype>", "convert the weights: f32, bf16 or f16 (default: as trained)")
    .option("--merge", "a LoRA checkpoint: write the base model with the adapter merged in (default: a PEFT adapter folder)")
    .option("--force", "replace --out even if it is a file or a non-empty directory (never the checkpoint or the base model)")
    .action((checkpoint: string, opts: { out: string; base?: string; dtype?: string; force?: boolean; merge?: boolean }) => {
      if (opts.dtype !== undefined && !["f32", "bf16", "f16"].includes(opts.dtype)) {
        throw new VagenError(`--dtype: got "${opts.dtype}", expected f32, bf16 or f16`);
      }
      const result = exportCheckpoint(checkpoint, opts.out, {
        base: opts.base,
        dtype: opts.dtype as "f32" | "bf16" | "f16" | undefined,
        force: opts.force === true,
        merge: opts.merge === true,
      });
      process.stdout.write(`exported ${result.tensors} tensors to ${result.out}\n`);
    });
}
