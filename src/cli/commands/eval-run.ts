/**
 * `vagen eval RUN_DIR`: a training run's best actor (or, without one, its newest
 * checkpoint) evaluated on the run's own validation envs, the way the trainer validates:
 * its harness, its validation sampling, its seeds. The checkpoint is exported as a model
 * directory and an ordinary eval config is written next to it, so the evaluation is a
 * plain `vagen eval` of a file the user can read and run again:
 *
 *   RUN_DIR/eval/<best_actor | step_N>/
 *     model/       the exported Hugging Face model directory
 *     eval.yaml    the eval config
 *     <tag>/...    episodes, summary.json (as any vagen eval writes them)
 */
import { existsSync, mkdirSync, readFileSync, statSync } from "node:fs";
import { join, resolve } from "node:path";
import YAML from "yaml";
import { VagenError } from "../../core/errors.ts";
import { writeFileAtomic } from "../../evaluation/outputs.ts";
import { latestCheckpoint } from "../../training/checkpoint.ts";
import { TrainConfig } from "../../training/config.ts";
import { exportCheckpoint } from "../../training/export.ts";
import * as v from "valibot";

/** A folder `vagen train` wrote: its config.yaml has `trainer` and `data` sections. */
export function isTrainRunDir(path: string): boolean {
  if (!existsSync(path) || !statSync(path).isDirectory()) return false;
  const cfg = join(path, "config.yaml");
  if (!existsSync(cfg)) return false;
  const parsed = YAML.parse(readFileSync(cfg, "utf8")) as Record<string, unknown> | null;
  return parsed !== null && typeof parsed === "object" && "trainer" in parsed && "data" in parsed;
}

/** The run's config.yaml, checked against the train schema (a hand-edited one is named). */
function runConfig(runDir: string): TrainConfig {
  const file = join(runDir, "config.yaml");
  const parsed = v.safeParse(TrainConfig, YAML.parse(readFileSync(file, "utf8")));
  if (!parsed.success) {
    const issue = parsed.issues[0];
    throw new VagenError(`${file}: key "${issue.path?.map((p) => String(p.key)).join(".") ?? ""}": ${issue.message}`, "vagen eval RUN_DIR reads the config.yaml vagen train wrote");
  }
  return parsed.output;
}

/** Which weights of the run to evaluate: best_actor/ if there is one, else the newest checkpoint. */
function chosenWeights(runDir: string): { path: string; name: string } {
  const best = join(runDir, "best_actor");
  if (existsSync(best)) return { path: best, name: "best_actor" };
  const latest = latestCheckpoint(join(runDir, "checkpoints"));
  if (latest) return { path: latest, name: latest.split("/").at(-1)! };
  throw new VagenError(`${runDir}: the run has no best_actor/ and no complete checkpoint under checkpoints/`, "train until a checkpoint or a validation is written, or evaluate a model directory with an eval config");
}

/**
 * Exports the run's weights and writes the eval config of its validation envs; returns
 * the config's path. `vagen eval` then runs it like any other.
 */
export function prepareRunEvaluation(runDir: string): { config: string; weights: string } {
  const dir = resolve(runDir);
  const config = runConfig(dir);
  const envs = Object.entries(config.data.val);
  if (envs.length === 0) throw new VagenError(`${join(dir, "config.yaml")}: key "data.val": the run has no validation envs to evaluate on`, "write an eval config for the envs you want (examples/eval/)");
  const weights = chosenWeights(dir);
  const out = join(dir, "eval", weights.name);
  mkdirSync(out, { recursive: true });
  const modelDir = join(out, "model");
  // the folder is this command's own: a newer best actor replaces the export of an older one;
  // a LoRA run's adapter is merged in, so the engine loads it as any model directory
  exportCheckpoint(weights.path, modelDir, { base: config.model.model_dir, force: existsSync(modelDir), merge: true });
  const val = config.rollout.val_kwargs;
  const evalConfig = {
    output_dir: out,
    model: {
      backend: "engine",
      model_dir: modelDir,
      // rendered as the run's rollouts were
      engine: { ...config.rollout.engine, device: config.model.device, dtype: config.model.dtype, chat_template_kwargs: config.data.apply_chat_template_kwargs },
      sampling: { temperature: val.temperature, top_p: val.top_p },
    },
    run: { base_seed: config.data.base_seed, resume: false },
    envs: Object.fromEntries(
      envs.map(([tag, spec]) => [
        tag,
        {
          name: spec.name,
          config: spec.config,
          episodes: spec.n_envs,
          ...(spec.seed_list ? { seeds: spec.seed_list } : { seed: spec.seed }),
          split: spec.split,
          harness: config.trainer.harness,
          max_turns: spec.max_turns,
          sampling: { max_tokens: spec.response_length_per_turn },
        },
      ]),
    ),
  };
  const file = join(out, "eval.yaml");
  writeFileAtomic(
    file,
    `# vagen eval ${runDir}: ${weights.name} of the run on its validation envs (data.val), with its\n# harness and validation sampling. Run again with: vagen eval ${file}\n${YAML.stringify(evalConfig)}`,
  );
  return { config: file, weights: weights.path };
}
