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
import { type ConfigKind, type ResolvedConfig, resolveConfig, validateResolved } from "../config/index.ts";
import { VagenError } from "../core/errors.ts";
import { createHarness } from "../harness/registry.ts";
import { checkStateRewardSetup } from "../rewards/setup.ts";
import { resolveEvalPaths } from "./config-paths.ts";
import { buildEvalPlan, type EvalPlan } from "./plan.ts";

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
 * Load, compose, override, validate and check an eval config file, and plan the run:
 * everything `vagen eval` checks before its first request (it runs the plan), and all
 * that `vagen config show` checks for an eval config.
 */
export async function loadEvalPlan(file: string, overrides: string[]): Promise<EvalPlan> {
  return planResolvedEvalConfig(resolveConfig(file, overrides));
}

/** The checked config of `loadEvalPlan`, for callers that only want the config. */
export async function loadEvalConfig(file: string, overrides: string[]): Promise<EvalConfig> {
  return (await loadEvalPlan(file, overrides)).config;
}

/**
 * The whole validation of a resolved eval config, ending in its plan: the schema, its
 * paths made absolute (config-paths.ts), the plan with its checks across keys
 * (plan.ts), and each env's own config and harness (built once and closed, so a typo
 * such as `dim_rom` fails here, naming its env).
 */
export async function planResolvedEvalConfig(resolved: ResolvedConfig): Promise<EvalPlan> {
  const plan = buildEvalPlan(resolveEvalPaths(validateResolved(EvalConfig, resolved), resolved), resolved.file);
  for (const env of plan.envs) {
    await withKeyContext(`${resolved.file}: key "envs.${env.tag}.harness"`, () => createHarness(env.harness.name, env.harness.options));
    const instance = await withKeyContext(`${resolved.file}: key "envs.${env.tag}": could not create env "${env.name}"`, () => createEnv(env.name, env.config));
    await instance.close();
    if (env.stateReward) {
      const promptFormat = typeof env.config.prompt_format === "string" ? env.config.prompt_format : undefined;
      checkStateRewardSetup({ config: env.stateReward, promptFormat, spec: instance.stateRewardSpec, where: `${resolved.file}: key "envs.${env.tag}.config.state_reward"`, envName: env.name });
    }
  }
  return plan;
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

/**
 * The eval config kind, for `vagen config show` (registered by the CLI at start-up;
 * see src/cli/main.ts).
 */
export const evalConfigKind: ConfigKind = {
  name: "eval",
  description: "vagen eval: one model backend, envs to evaluate",
  schema: EvalConfig,
  load: async (resolved) => (await planResolvedEvalConfig(resolved)).config,
  detect: (data) => "envs" in data && "model" in data && "output_dir" in data,
};
