/**
 * A validated eval config, resolved once into a plan: every episode's env, env config,
 * seed, harness and sampling, and where it is written. The runner only executes a plan;
 * nothing downstream reads the config's seed keys or merges sampling again.
 *
 * The seeding of env specs (`planEnvSpecs`, src/core/env-plan.ts, re-exported here) is
 * shared with the trainer's dataset of env specs, so `seed: [lo, hi, k]` means the same
 * seeds in `vagen eval` and `vagen train`.
 */
import * as v from "valibot";
import { toSamplingParams } from "../clients/config.ts";
import type { SamplingParams } from "../clients/types.ts";
import { VagenError } from "../core/errors.ts";
import { planEnvSpecs, type EnvSpec } from "../core/env-plan.ts";
import { validate } from "../config/index.ts";
import { enabledSections, splitStateReward, StateRewardConfig } from "../rewards/config.ts";
import type { EnvEvalSpec, EvalConfig, HarnessSpec } from "./config-schema.ts";
import { episodeDir } from "./layout.ts";
import type { PlannedEnvSummary } from "./events.ts";

export { envSpecSeeds, planEnvSpecs, type EnvSpec, type SeededEpisode } from "../core/env-plan.ts";

/** A harness as configured: a name or import path, and its options. */
export interface HarnessChoice {
  name: string;
  options: Record<string, unknown>;
}

/** Split a harness spec (`concat`, or `{name: compact, history_turns: 3}`) into name and options. */
export function harnessChoice(spec: HarnessSpec): HarnessChoice {
  if (typeof spec === "string") return { name: spec, options: {} };
  const { name, ...options } = spec;
  return { name, options };
}

/** One env of an eval plan: everything its episodes share. */
export interface PlannedEnv extends EnvSpec {
  /** The env's key under `envs:`; names its output folder and summary row. */
  tag: string;
  harness: HarnessChoice;
  /** model.sampling with the env's own sampling merged over it. */
  sampling: SamplingParams;
  /** The env's image placeholder in observation text, when its config sets one. */
  imagePlaceholder?: string;
  /** Its episodes' seeds, in order. */
  seeds: number[];
  /**
   * The env's world-model reward, when its config's `state_reward` enables a section
   * (split off `config`, which the env gets without it, as main's build_env pops it).
   */
  stateReward?: StateRewardConfig;
}

/** One episode of an eval plan. */
export interface PlannedEpisode {
  env: PlannedEnv;
  seed: number;
  /** Its output folder: `<output_dir>/<tag>/seed_<seed>`. */
  dir: string;
}

export interface EvalPlan {
  /** The checked config the plan came from (written to the run's config.yaml). */
  config: EvalConfig;
  outputDir: string;
  /** Skip episodes whose folder holds a metrics.json from a normal finish. */
  resume: boolean;
  maxConcurrentEpisodes: number;
  /** In config order. */
  envs: PlannedEnv[];
  /** Env by env in config order, seed by seed within an env. */
  episodes: PlannedEpisode[];
}

/**
 * The plan for a validated eval config (paths already resolved, see config-paths.ts).
 * Checks what spans keys, naming them with `file`: at least one env, one way of choosing
 * seeds per env, enough seeds, and no seed twice within an env (episodes are stored per
 * seed, so a repeat would overwrite its twin and count twice on resume).
 *
 * VAGEN's envs are a list and its seed hash takes the list index; here envs are a
 * mapping, and the index is the tag's position in key order (the order in the file; a
 * `defaults:` file's envs come first).
 */
export function buildEvalPlan(config: EvalConfig, file = "eval config"): EvalPlan {
  const tags = Object.keys(config.envs);
  if (tags.length === 0) {
    throw new VagenError(`${file}: key "envs": no envs to evaluate`, "add one, e.g. envs: {sokoban: {name: Sokoban, episodes: 8}}");
  }
  const modelSampling = toSamplingParams(config.model.sampling);
  const envs: PlannedEnv[] = tags.map((tag) => {
    const spec = config.envs[tag]!;
    checkSeedKeys(spec, `${file}: key "envs.${tag}.seed`);
    const { env: envConfig, stateReward: rawStateReward } = splitStateReward(spec.config);
    const stateReward = rawStateReward === undefined ? undefined : validateAt(["envs", tag, "config", "state_reward"], StateRewardConfig, rawStateReward, file);
    const placeholder = envConfig.image_placeholder;
    return {
      tag,
      name: spec.name,
      config: envConfig,
      count: spec.episodes,
      seed: spec.seed,
      seedList: spec.seeds,
      seedStart: spec.seed_start,
      split: spec.split,
      maxTurns: spec.max_turns,
      harness: harnessChoice(spec.harness),
      sampling: { ...modelSampling, ...toSamplingParams(spec.sampling) },
      imagePlaceholder: typeof placeholder === "string" ? placeholder : undefined,
      seeds: [],
      ...(stateReward && enabledSections(stateReward).length > 0 ? { stateReward } : {}),
    };
  });
  const seedKey = (i: number) => {
    const spec = envs[i]!;
    return `${file}: key "envs.${spec.tag}.${spec.seedList ? "seeds" : "seed"}"`;
  };
  const episodes: PlannedEpisode[] = planEnvSpecs(envs, config.run.base_seed, seedKey).map(({ spec, seed }) => {
    spec.seeds.push(seed);
    return { env: spec, seed, dir: episodeDir(config.output_dir, spec.tag, seed) };
  });
  for (const env of envs) checkSeedsDistinct(env.seeds, `${file}: key "envs.${env.tag}`);
  return {
    config,
    outputDir: config.output_dir,
    resume: config.run.resume,
    maxConcurrentEpisodes: config.run.max_concurrent_episodes,
    envs,
    episodes,
  };
}

/** The plan's envs as `run_started` shows them; `skipped` counts each env's episodes already finished. */
export function planSummary(plan: EvalPlan, skipped: (env: PlannedEnv) => number): PlannedEnvSummary[] {
  return plan.envs.map((env) => ({
    tag: env.tag,
    envName: env.name,
    harness: env.harness.name,
    maxTurns: env.maxTurns,
    episodes: env.seeds.length,
    skipped: skipped(env),
  }));
}

/**
 * A directive picks the seeds alone: combined with seed_start or seeds, one would be
 * ignored. `key` is the message prefix up to the key path, without the closing quote.
 */
function checkSeedKeys(spec: EnvEvalSpec, key: string): void {
  if (spec.seed === undefined) return;
  const other = spec.seed_start !== undefined ? "seed_start" : spec.seeds !== undefined ? "seeds" : undefined;
  if (other) throw new VagenError(`${key}": a seed directive and ${other} both choose the seeds; keep one of them`);
}

/** `[lo, hi]` and `[lo, hi, k > 1]` may repeat seeds; eval can't store two episodes under one. `key` as above. */
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
 * `data` validated as the value at `path` of the config, so a mistake is reported with
 * its whole key path (`key "envs.sokoban.config.state_reward.score_base"`) and the file.
 */
function validateAt<S extends v.GenericSchema>(path: readonly string[], schema: S, data: unknown, file: string): v.InferOutput<S> {
  let nested: v.GenericSchema = schema;
  let value: unknown = data;
  for (const key of [...path].reverse()) {
    nested = v.object({ [key]: nested });
    value = { [key]: value };
  }
  let out: unknown = validate(nested, value, { file });
  for (const key of path) out = (out as Record<string, unknown>)[key];
  return out as v.InferOutput<S>;
}
