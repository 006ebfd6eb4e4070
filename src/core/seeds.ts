/**
 * VAGEN's seed directives (`seed: [lo, hi, k]` in an eval env entry), reproducing
 * `generate_seeds_for_spec` number for number:
 *
 * - `[a]`: n values uniform in [0, 2^31 - 1] (VAGEN draws `randrange(0, 2**31)`, which is
 *   the same call as `randint(0, 2**31 - 1)`). `a` only feeds the hash, so different
 *   `a` give different streams.
 * - `[lo, hi]`: n values `randrange(lo, hi + 1)`, with replacement; all `lo` if lo == hi
 *   (without touching the RNG).
 * - `[lo, hi, k]`: no value more than k times. k = 1 is `sample(range(lo, hi + 1), n)`;
 *   k > 1 redraws `randint(lo, hi)` whenever the value has already appeared k times.
 *
 * The RNG is Python's `random.Random`, seeded with the little-endian integer of the 8-byte
 * BLAKE2b of "{base_seed}|{spec_idx}|{name}|{split}|seed-{directive}", the directive
 * written as Python prints a list ("[0, 128, 1]"). Any change to those inputs (including
 * the env's position in the config) gives a different, unrelated seed list.
 */
import { VagenError } from "./errors.ts";
import { blake2b } from "./blake2b.ts";
import { PythonRandom, pythonRange } from "./python-random.ts";

/** One to three integers: `[a]`, `[lo, hi]` or `[lo, hi, k]`. */
export type SeedDirective = readonly number[];

/** Everything besides the directive that goes into an env's seed hash. */
export interface SeedStream {
  /** `run.base_seed`. */
  baseSeed: number;
  /** The env's position in the config (0-based). */
  specIndex: number;
  /** The env name as written in the config (`Sokoban`). */
  name: string;
  /** The env entry's `split` (VAGEN's default is "default"). */
  split: string;
}

/** The largest seed the `[a]` directive draws: 2^31 - 1. */
export const MAX_INT32 = 2 ** 31 - 1;

/** A bare integer `seed: 7` means `[7]`, as in VAGEN. */
export function normalizeSeedDirective(seed: number | readonly number[]): SeedDirective {
  return typeof seed === "number" ? [seed] : seed;
}

/** Python's repr of a list of ints: "[0, 128, 1]". */
export function pythonListRepr(values: readonly number[]): string {
  return `[${values.join(", ")}]`;
}

/** The integer `random.Random` is seeded with for this env and directive. */
export function seedRngSeed(directive: SeedDirective, stream: SeedStream): bigint {
  const payload = `${stream.baseSeed}|${stream.specIndex}|${stream.name}|${stream.split}|seed-${pythonListRepr(directive)}`;
  const digest = blake2b(new TextEncoder().encode(payload), 8);
  return digest.reduceRight((value, byte) => (value << 8n) | BigInt(byte), 0n);
}

/**
 * Why `directive` can't give `count` seeds, or undefined if it can. Checked before any
 * drawing, so a config mistake is reported as such rather than as an endless loop.
 */
export function seedDirectiveProblem(directive: SeedDirective, count: number): string | undefined {
  const shown = pythonListRepr(directive);
  if (directive.length < 1 || directive.length > 3) return `${shown}: a seed directive is [a], [lo, hi] or [lo, hi, k]`;
  if (!directive.every(Number.isSafeInteger)) return `${shown}: seed directive values must be integers within ±2^53`;
  if (directive.length === 1) return undefined;
  const [lo, hi, limit] = directive as [number, number, number?];
  if (hi < lo) return `${shown}: hi (${hi}) is below lo (${lo})`;
  if (limit === undefined) return undefined;
  if (limit < 1) return `${shown}: the repeat limit k must be at least 1`;
  const available = (hi - lo + 1) * limit;
  if (available < count) {
    return `${shown}: ${hi - lo + 1} value(s) used at most ${limit} time(s) each give ${available} seed(s), but ${count} episode(s) need one each`;
  }
  return undefined;
}

/** The `count` seeds VAGEN's generate_seeds_for_spec gives for this directive and env. */
export function directiveSeeds(directive: SeedDirective, count: number, stream: SeedStream): number[] {
  const problem = seedDirectiveProblem(directive, count);
  if (problem) throw new VagenError(`seed ${problem}`);
  const rng = new PythonRandom(seedRngSeed(directive, stream));
  const [lo, hi, limit] = directive as [number, number?, number?];
  if (hi === undefined) return repeat(count, () => rng.randrange(0, MAX_INT32 + 1));
  if (limit === undefined) return lo === hi ? repeat(count, () => lo) : repeat(count, () => rng.randrange(lo, hi + 1));
  if (limit === 1) return rng.sample(pythonRange(lo, hi + 1), count);
  return cappedDraws(rng, lo, hi, limit, count);
}

/** `randint(lo, hi)` until `count` values are kept, dropping any already kept `limit` times. */
function cappedDraws(rng: PythonRandom, lo: number, hi: number, limit: number, count: number): number[] {
  const timesKept = new Map<number, number>();
  const seeds: number[] = [];
  while (seeds.length < count) {
    const candidate = rng.randint(lo, hi);
    const kept = timesKept.get(candidate) ?? 0;
    if (kept >= limit) continue;
    timesKept.set(candidate, kept + 1);
    seeds.push(candidate);
  }
  return seeds;
}

function repeat<T>(count: number, draw: () => T): T[] {
  return Array.from({ length: count }, draw);
}
