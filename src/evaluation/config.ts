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
 *       seed: [10000, 10128, 1]   # VAGEN's seed directive; or seed_start / seeds
 *       harness: concat
 *       max_turns: 5
 */
import * as v from "valibot";
import { ModelConfig, SamplingConfig } from "../clients/config.ts";
import { createEnv } from "../../envs/registry.ts";
import { type ResolvedConfig, registerConfigKind, resolveConfig, validateResolved } from "../config/index.ts";
import { VagenError } from "../core/errors.ts";
import { createHarness } from "../harness/registry.ts";
import { resolveEvalPaths } from "./config-paths.ts";
import { type SeedDirective, directiveSeeds, normalizeSeedDirective, seedDirectiveProblem } from "../core/seeds.ts";

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

/**
 * Checks that span keys (which the schema can't say well): at least one env, one way of
 * choosing seeds per env, enough seeds, and no seed twice (episodes are stored per seed).
 * `file` names the config in the message.
 */
export function checkEvalConfig(config: EvalConfig, file = "eval config"): EvalConfig {
  if (Object.keys(config.envs).length === 0) {
    throw new VagenError(`${file}: key "envs": no envs to evaluate`, "add one, e.g. envs: {sokoban: {name: Sokoban, episodes: 8}}");
  }
  for (const [tag, spec] of Object.entries(config.envs)) {
    checkSeedKeys(spec, `${file}: key "envs.${tag}`);
    checkSeedsDistinct(episodeSeedsForTag(config, tag), `${file}: key "envs.${tag}`);
  }
  return config;
}

/** `key` is the message prefix up to the env's key path, without the closing quote. */
function checkSeedKeys(spec: EnvEvalSpec, key: string): void {
  if (spec.seed !== undefined) {
    const other = spec.seed_start !== undefined ? "seed_start" : spec.seeds !== undefined ? "seeds" : undefined;
    if (other) throw new VagenError(`${key}.seed": a seed directive and ${other} both choose the seeds; keep one of them`);
    const problem = seedDirectiveProblem(seedDirectiveOf(spec)!, spec.episodes);
    if (problem) throw new VagenError(`${key}.seed": ${problem}`, "widen [lo, hi], raise k, or lower episodes");
  }
  if (spec.seeds && spec.seeds.length < spec.episodes) {
    throw new VagenError(`${key}.seeds": ${spec.seeds.length} seed(s) listed but episodes is ${spec.episodes}; list at least as many seeds as episodes`);
  }
}

/**
 * Episode folders are named by seed, so a repeated seed would overwrite its twin (and
 * resume would count it twice). `[lo, hi]` and `[lo, hi, k > 1]` may repeat seeds.
 */
function checkSeedsDistinct(seeds: number[], key: string): void {
  const seen = new Set<number>();
  for (const seed of seeds) {
    if (seen.has(seed)) {
      throw new VagenError(
        `${key}": seed ${seed} comes up more than once; each episode needs its own seed`,
        "use a directive that can't repeat ([lo, hi, 1]), or list distinct seeds",
      );
    }
    seen.add(seed);
  }
}

/**
 * Load, compose, override, validate and check an eval config file: everything `vagen eval`
 * checks before its first request, and all that `vagen config show` checks for an eval
 * config (both call this).
 */
export async function loadEvalConfig(file: string, overrides: string[]): Promise<EvalConfig> {
  return checkResolvedEvalConfig(resolveConfig(file, overrides));
}

/**
 * The whole validation of a resolved eval config: the schema, its paths made absolute
 * (config-paths.ts), the checks across keys, and each env's own config and harness
 * (built once and closed, so a typo such as `dim_rom` fails here, naming its env).
 */
export async function checkResolvedEvalConfig(resolved: ResolvedConfig): Promise<EvalConfig> {
  const config = checkEvalConfig(resolveEvalPaths(validateResolved(EvalConfig, resolved), resolved), resolved.file);
  for (const [tag, spec] of Object.entries(config.envs)) {
    const { name, options } = harnessNameAndOptions(spec.harness);
    await withKeyContext(`${resolved.file}: key "envs.${tag}.harness"`, () => createHarness(name, options));
    const env = await withKeyContext(`${resolved.file}: key "envs.${tag}": could not create env "${spec.name}"`, () => createEnv(spec.name, spec.config));
    await env.close();
  }
  return config;
}

/** Run `make`, prefixing a failure's message with where in the config it comes from. */
async function withKeyContext<T>(where: string, make: () => Promise<T>): Promise<T> {
  try {
    return await make();
  } catch (err) {
    const message = err instanceof Error ? err.message : String(err);
    throw new VagenError(`${where}: ${message}`, err instanceof VagenError ? err.hint : undefined);
  }
}

/** Where an env sits in the run, for its seed directive's hash. */
export interface SeedPosition {
  /** The env's index in the config's `envs` mapping, in the order the keys appear. */
  specIndex: number;
  /** `run.base_seed`. */
  baseSeed: number;
}

function seedDirectiveOf(spec: EnvEvalSpec): SeedDirective | undefined {
  return spec.seed === undefined ? undefined : normalizeSeedDirective(spec.seed);
}

/**
 * The seeds of an env's episodes, in order. A spec with a seed directive also needs its
 * position in the run (see `episodeSeedsForTag`).
 */
export function episodeSeeds(spec: EnvEvalSpec, position?: SeedPosition): number[] {
  if (spec.seeds) return spec.seeds.slice(0, spec.episodes);
  const directive = seedDirectiveOf(spec);
  if (directive) {
    if (!position) throw new Error(`episodeSeeds: env "${spec.name}" has a seed directive; pass its index and base_seed`);
    return directiveSeeds(directive, spec.episodes, { ...position, name: spec.name, split: spec.split });
  }
  const start = spec.seed_start ?? 0;
  return Array.from({ length: spec.episodes }, (_, i) => start + i);
}

/**
 * The seeds of the env under `tag`. VAGEN's envs are a list and its hash takes the list
 * index; here envs are a mapping, and the index is the tag's position in key order (the
 * order in the file; a `defaults:` file's envs come first).
 */
export function episodeSeedsForTag(config: EvalConfig, tag: string): number[] {
  const specIndex = Object.keys(config.envs).indexOf(tag);
  const spec = config.envs[tag];
  if (!spec || specIndex < 0) throw new Error(`episodeSeedsForTag: no env "${tag}" in the config`);
  return episodeSeeds(spec, { specIndex, baseSeed: config.run.base_seed });
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
  load: checkResolvedEvalConfig,
  detect: (data) => "envs" in data && "model" in data && "output_dir" in data,
});
