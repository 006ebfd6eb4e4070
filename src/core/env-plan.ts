/**
 * Seed planning for a list of env specs, in VAGEN's semantics: which episodes a list of
 * env specs gives, each with its seed. `vagen eval` plans its envs with it
 * (src/evaluation/plan.ts) and `vagen train` its dataset (src/training/dataset.ts), so
 * `seed: [lo, hi, k]` means the same seeds in both. Pure: seeds and errors, nothing else.
 */
import { VagenError } from "./errors.ts";
import { directiveSeeds, normalizeSeedDirective, type SeedDirective, seedDirectiveProblem } from "./seeds.ts";

/** Whether an env (or harness) reference is an import path (`path/to/file.ts:Export`) rather than a registered name. */
export function isImportPath(ref: string): boolean {
  return /\.(ts|tsx|js|mjs)(:|$)/.test(ref) || ref.includes("/");
}

/**
 * The env's name as it keys the seed directive's stream: a registered name as written, an
 * import path by its file's base name and export (`digit-env.ts:DigitEnv`). Configs make
 * a relative import path absolute (and a run's config.yaml keeps it so), so hashing the
 * path itself would draw other episodes from the same config in another folder.
 */
export function seedStreamName(name: string): string {
  if (!isImportPath(name)) return name;
  const slash = Math.max(name.lastIndexOf("/"), name.lastIndexOf("\\"));
  return name.slice(slash + 1);
}

/**
 * One entry of a list of env specs, in VAGEN's semantics (its dataset yaml's `envs[]`,
 * and vagen's eval `envs:` entries). Which seeds the episodes get, first match wins:
 * `seedList` (VAGEN's `seed_list`), else the directive `seed` (`[a]`, `[lo, hi]`,
 * `[lo, hi, k]`, or a bare `a`; see src/core/seeds.ts), else `seedStart + i` (from 0).
 */
export interface EnvSpec {
  /** Registered env name or import path; also part of the seed directive's hash (seedStreamName). */
  name: string;
  /** The env's own config, passed through untouched. */
  config: Record<string, unknown>;
  /** Episodes of this spec: VAGEN's `n_envs` (training), eval's `episodes`. */
  count: number;
  /** VAGEN's seed directive. */
  seed?: number | readonly number[];
  /** Explicit seeds; the first `count` are used (at least `count` must be given). */
  seedList?: readonly number[];
  /** Seeds `seedStart`, `seedStart + 1`, ... when neither of the above is set. */
  seedStart?: number;
  /** VAGEN's split label (default "default"); it only feeds the directive's hash. */
  split?: string;
  /** Model turns per episode at most (VAGEN's required `max_turns`). */
  maxTurns: number;
}

/** One episode of a spec list: which spec (by reference and position) and its seed. */
export interface SeededEpisode<S extends EnvSpec = EnvSpec> {
  spec: S;
  /** The spec's position in the list: it feeds the seed hash, as VAGEN's list index does. */
  specIndex: number;
  /** The episode's position within its spec (0-based). */
  index: number;
  seed: number;
}

/**
 * The seeds of one env spec, in order. `specIndex` is the spec's position in its list and
 * `baseSeed` the run's base seed (VAGEN's `data.base_seed` / eval's `run.base_seed`): with
 * the env name and split they key the directive's random stream, exactly as VAGEN's
 * `generate_seeds_for_spec` does. `where` prefixes error messages (a config key path).
 */
export function envSpecSeeds(spec: EnvSpec, specIndex: number, baseSeed: number, where = `env spec ${specIndex}`): number[] {
  if (spec.seedList) {
    if (spec.seedList.length < spec.count) {
      throw new VagenError(`${where}: ${spec.seedList.length} seed(s) listed but episodes is ${spec.count}; list at least as many seeds as episodes`);
    }
    return spec.seedList.slice(0, spec.count);
  }
  if (spec.seed !== undefined) {
    const directive: SeedDirective = normalizeSeedDirective(spec.seed);
    const problem = seedDirectiveProblem(directive, spec.count);
    if (problem) throw new VagenError(`${where}: ${problem}`, "widen [lo, hi], raise k, or lower episodes");
    return directiveSeeds(directive, spec.count, { baseSeed, specIndex, name: seedStreamName(spec.name), split: spec.split ?? "default" });
  }
  const start = spec.seedStart ?? 0;
  return Array.from({ length: spec.count }, (_, i) => start + i);
}

/**
 * Every episode of a list of env specs, spec by spec, each with its seed: the dataset of
 * env specs that both eval and training run.
 *
 * For the trainer's dataset (VAGEN's env-spec semantics), map each dataset entry to an
 * `EnvSpec` and keep whatever else the entry carries on it (the result hands each
 * episode its own spec object back):
 *
 *   const specs = dataset.envs.map((e) => ({
 *     name: e.name, config: e.config, count: e.n_envs, seed: e.seed, seedList: e.seed_list,
 *     maxTurns: e.max_turns, sampling: { maxTokens: e.response_length_per_turn },
 *   }));
 *   const episodes = planEnvSpecs(specs, config.data.base_seed);
 *   // episodes[i].spec.sampling, episodes[i].seed, episodes[i].spec.maxTurns ...
 *
 * Seeds may repeat (`[lo, hi]`, or `[lo, hi, k]` with k > 1), as VAGEN allows in
 * training; eval refuses repeats itself (its folders are per seed). Shuffling, and `n`
 * rollouts per entry, are the trainer's: this is the unshuffled list in spec order.
 * `where(i)` names spec i in errors (default "env spec i"; eval passes its key path).
 */
export function planEnvSpecs<S extends EnvSpec>(specs: readonly S[], baseSeed = 0, where?: (specIndex: number) => string): SeededEpisode<S>[] {
  const episodes: SeededEpisode<S>[] = [];
  specs.forEach((spec, specIndex) => {
    const seeds = envSpecSeeds(spec, specIndex, baseSeed, where?.(specIndex));
    seeds.forEach((seed, index) => episodes.push({ spec, specIndex, index, seed }));
  });
  return episodes;
}
