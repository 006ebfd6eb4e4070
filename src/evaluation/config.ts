/**
 * The `vagen eval` config. One model backend, and the envs to evaluate keyed by a tag
 * (the tag names the output folder and the summary row, and keys overrides such as
 * `envs.sokoban_text.episodes=4`):
 *
 *   output_dir: runs/eval/sokoban
 *   model: {backend: openai, base_url: http://127.0.0.1:8000/v1, model: Qwen/Qwen2.5-VL-3B-Instruct}
 *   run: {max_concurrent_episodes: 8, resume: true}
 *   envs:
 *     sokoban_text:
 *       name: Sokoban
 *       config: {render_mode: text}
 *       episodes: 16
 *       seed_start: 10000
 *       harness: concat
 *       max_turns: 5
 */
import * as v from "valibot";
import { ModelConfig, SamplingConfig } from "../clients/config.ts";
import { loadConfig, registerConfigKind } from "../config/index.ts";
import { VagenError } from "../errors.ts";

const positiveInt = (what: string) => v.pipe(v.number(), v.integer(`${what}: an integer`), v.minValue(1, `${what} >= 1`));

/** `concat`, `./my_harness.ts:MyHarness`, or `{name: compact, history_turns: 3}`. */
export const HarnessSpec = v.union(
  [v.pipe(v.string(), v.minLength(1)), v.looseObject({ name: v.pipe(v.string(), v.minLength(1)) })],
  "a harness name (concat, no_concat, compact), an import path like ./file.ts:Export, or {name: ..., <options>}",
);
export type HarnessSpec = v.InferOutput<typeof HarnessSpec>;

export const EnvEvalSpec = v.strictObject({
  /** Registered env name (Sokoban, FrozenLake, ...) or an import path. */
  name: v.pipe(v.string(), v.minLength(1)),
  /** The env's own config (validated by the env). */
  config: v.optional(v.record(v.string(), v.unknown()), {}),
  episodes: positiveInt("episodes"),
  /** Episode i uses seed seed_start + i ... */
  seed_start: v.optional(v.pipe(v.number(), v.integer()), 0),
  /** ... unless explicit seeds are listed (at least `episodes` of them; the first ones are used). */
  seeds: v.optional(v.array(v.pipe(v.number(), v.integer()))),
  harness: v.optional(HarnessSpec, "concat"),
  max_turns: v.optional(positiveInt("max_turns"), 5),
  /** Per-env sampling, merged over model.sampling (e.g. a larger max_tokens for one env). */
  sampling: v.optional(SamplingConfig, {}),
});
export type EnvEvalSpec = v.InferOutput<typeof EnvEvalSpec>;

export const RunConfig = v.strictObject({
  /** Episodes running at once (requests are further limited by model.max_concurrency). */
  max_concurrent_episodes: v.optional(positiveInt("max_concurrent_episodes"), 8),
  /** Skip episodes that already have a metrics.json from a normal finish. */
  resume: v.optional(v.boolean(), true),
});

const TAG = /^[A-Za-z0-9][\w.-]*$/;

export const EvalConfig = v.strictObject({
  /** Where episodes and summary.json go (relative paths are relative to the working directory). */
  output_dir: v.pipe(v.string(), v.minLength(1, "a directory path")),
  model: ModelConfig,
  run: v.optional(RunConfig, {}),
  envs: v.record(v.pipe(v.string(), v.regex(TAG, "a tag of letters, digits, '_', '-' and '.'")), EnvEvalSpec),
});
export type EvalConfig = v.InferOutput<typeof EvalConfig>;

/**
 * Checks that span keys (which the schema can't say well): at least one env, and enough
 * explicit seeds. `file` names the config in the message.
 */
export function checkEvalConfig(config: EvalConfig, file = "eval config"): EvalConfig {
  if (Object.keys(config.envs).length === 0) {
    throw new VagenError(`${file}: key "envs": no envs to evaluate`, "add one, e.g. envs: {sokoban: {name: Sokoban, episodes: 8}}");
  }
  for (const [tag, spec] of Object.entries(config.envs)) {
    if (spec.seeds && spec.seeds.length < spec.episodes) {
      throw new VagenError(`${file}: key "envs.${tag}.seeds": ${spec.seeds.length} seed(s) listed but episodes is ${spec.episodes}; list at least as many seeds as episodes`);
    }
  }
  return config;
}

/** Load, compose, override, validate and check an eval config file. */
export function loadEvalConfig(file: string, overrides: string[]): EvalConfig {
  return checkEvalConfig(loadConfig(file, overrides, EvalConfig), file);
}

/** The seeds of an env's episodes, in order. */
export function episodeSeeds(spec: EnvEvalSpec): number[] {
  if (spec.seeds) return spec.seeds.slice(0, spec.episodes);
  return Array.from({ length: spec.episodes }, (_, i) => spec.seed_start + i);
}

/** Split a harness spec into its name (or import path) and its options. */
export function harnessNameAndOptions(spec: HarnessSpec): { name: string; options: Record<string, unknown> } {
  if (typeof spec === "string") return { name: spec, options: {} };
  const { name, ...options } = spec;
  return { name, options };
}

// `vagen config show` validates eval configs with this schema.
registerConfigKind({
  name: "eval",
  description: "vagen eval: one model backend, envs to evaluate",
  schema: EvalConfig,
  detect: (data) => "envs" in data && "model" in data && "output_dir" in data,
});
