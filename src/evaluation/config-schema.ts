/**
 * The `vagen eval` config's schema (config.ts loads and checks it): a leaf of plain
 * valibot schemas, so the plan and the path resolution (plan.ts, config-paths.ts), which
 * config.ts runs, can take its types without importing config.ts back.
 */
import * as v from "valibot";
import { ModelConfig, SamplingConfig } from "../clients/config.ts";

const positiveInt = (what: string) => v.pipe(v.number(), v.integer(`${what}: an integer`), v.minValue(1, `${what} >= 1`));
const integer = v.pipe(v.number(), v.safeInteger("an integer"));

/** `[a]`, `[lo, hi]`, `[lo, hi, k]`, or a bare `a` (see seeds.ts). */
const SeedDirectiveSpec = v.union(
  [integer, v.pipe(v.array(integer), v.minLength(1), v.maxLength(3))],
  "a seed directive: [a], [lo, hi] or [lo, hi, k] (k = how often one seed may repeat)",
);

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
  /** Episode i uses seed seed_start + i (default 0) ... */
  seed_start: v.optional(v.pipe(v.number(), v.integer())),
  /** ... unless explicit seeds are listed (at least `episodes` of them; the first ones are used) ... */
  seeds: v.optional(v.array(v.pipe(v.number(), v.integer()))),
  /** ... or VAGEN's seed directive draws them (not combinable with seed_start or seeds). */
  seed: v.optional(SeedDirectiveSpec),
  /** VAGEN's split label; it only feeds the seed directive's hash. */
  split: v.optional(v.pipe(v.string(), v.minLength(1)), "default"),
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
  /** VAGEN's base_seed: feeds every env's seed directive hash. */
  base_seed: v.optional(integer, 0),
});

const TAG = /^[A-Za-z0-9][\w.-]*$/;

export const EvalConfig = v.strictObject({
  /** Where episodes and summary.json go (relative to the config file that sets it; see config-paths.ts). */
  output_dir: v.pipe(v.string(), v.minLength(1, "a directory path")),
  model: ModelConfig,
  run: v.optional(RunConfig, {}),
  envs: v.record(v.pipe(v.string(), v.regex(TAG, "a tag of letters, digits, '_', '-' and '.'")), EnvEvalSpec),
});
export type EvalConfig = v.InferOutput<typeof EvalConfig>;
