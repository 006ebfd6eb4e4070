/**
 * Seed directives, bit-exact with VAGEN's Python. Every expected value below was printed
 * by CPython 3.11 (hashlib.blake2b, random.Random) through fixtures/make_seed_refs.py.
 */
import { describe, expect, test } from "bun:test";
import { validate } from "../../src/config/index.ts";
import { blake2b } from "../../src/core/blake2b.ts";
import { EvalConfig } from "../../src/evaluation/config.ts";
import { buildEvalPlan, envSpecSeeds, type EvalPlan } from "../../src/evaluation/plan.ts";
import { seedStreamName } from "../../src/core/env-plan.ts";
import { PythonRandom, pythonRange } from "../../src/core/python-random.ts";
import { directiveSeeds, pythonListRepr, type SeedDirective, seedRngSeed, type SeedStream } from "../../src/core/seeds.ts";

const hex = (bytes: Uint8Array) => Buffer.from(bytes).toString("hex");
const ascii = (text: string) => new TextEncoder().encode(text);
const BIG_SEED = 2n ** 63n + 12345n; // above 2^53: a two-word MT key

const draws = <T>(count: number, draw: () => T): T[] => Array.from({ length: count }, draw);

describe("blake2b", () => {
  test("matches hashlib.blake2b for several digest sizes and block boundaries", () => {
    expect(hex(blake2b(new Uint8Array(0), 64))).toBe(
      "786a02f742015903c6c6fd852552d272912f4740e15847618a86e217f71f5419d25e1031afee585313896444934eb04b903a685b1448b755d56f701afe9be2ce",
    );
    expect(hex(blake2b(ascii("abc"), 64))).toBe(
      "ba80a53f981c4d0d6a2797b69f12f6e94c212f14685ac4b74b12bb6fdbffa2d17d87c5392aab792dc252d5de4533cc9518d38aa8dbf1925ab92386edd4009923",
    );
    expect(hex(blake2b(ascii("abc"), 32))).toBe("bddd813c634239723171ef3fee98579b94964e3bb1cb3e427262c8c068d52319");
    expect(hex(blake2b(ascii("abc"), 8))).toBe("d8bb14d833d59559");
    expect(hex(blake2b(ascii("a".repeat(128)), 8))).toBe("f06643fe9c7e18da");
    expect(hex(blake2b(ascii("a".repeat(129)), 20))).toBe("eeff408d65ecf3235b2586586d331fea9014b8d8");
    const threeHundred = new Uint8Array(300);
    threeHundred.set(Array.from({ length: 256 }, (_, i) => i));
    expect(hex(blake2b(threeHundred, 64))).toBe(
      "aa3cd72a60ea2f16d489990f2a3567cd85cbe7b618d8fd605e12fcbc5130d037919680c7ede1e41d440455bd66cff2ce9a266a80c1331584f372ad08c08e1b81",
    );
  });

  test("an 8-byte digest is not a truncated 64-byte one", () => {
    expect(hex(blake2b(ascii("abc"), 64)).slice(0, 16)).not.toBe(hex(blake2b(ascii("abc"), 8)));
  });

  test("rejects digest sizes outside 1..64", () => {
    expect(() => blake2b(ascii("abc"), 0)).toThrow("1..64");
    expect(() => blake2b(ascii("abc"), 65)).toThrow("1..64");
  });
});

describe("PythonRandom", () => {
  test("getrandbits matches random.Random for small, one-word and two-word seeds", () => {
    const zero = new PythonRandom(0);
    expect(draws(6, () => zero.getrandbits(32))).toEqual([3626764237n, 1654615998n, 3255389356n, 3823568514n, 1806341205n, 173879092n]);
    const fortyTwo = new PythonRandom(42);
    expect(draws(6, () => fortyTwo.getrandbits(7))).toEqual([81n, 14n, 3n, 94n, 35n, 31n]);
    const big64 = new PythonRandom(BIG_SEED);
    expect(draws(3, () => big64.getrandbits(64))).toEqual([7167334772245903187n, 2858341439805453424n, 5319021101471089376n]);
    const big33 = new PythonRandom(BIG_SEED);
    expect(draws(3, () => big33.getrandbits(33))).toEqual([1308997459n, 912389232n, 2851980000n]);
  });

  test("randint matches, including negative ranges and widths above 2^32", () => {
    const zero = new PythonRandom(0);
    expect(draws(10, () => zero.randint(0, 10))).toEqual([6, 6, 0, 4, 8, 7, 6, 4, 7, 5]);
    const fortyTwo = new PythonRandom(42);
    expect(draws(10, () => fortyTwo.randint(-5, 5))).toEqual([5, -4, -5, -1, -2, -2, -3, -4, 5, 3]);
    const bigInt31 = new PythonRandom(BIG_SEED);
    expect(draws(5, () => bigInt31.randint(0, 2 ** 31 - 1))).toEqual([1308997459, 1668775168, 912389232, 665509477, 1238431106]);
    const bigWide = new PythonRandom(BIG_SEED);
    expect(draws(3, () => bigWide.randint(0, 2 ** 40))).toEqual([851712522067, 340214805616, 634212172512]);
    expect(() => new PythonRandom(0).randrange(3, 3)).toThrow("empty range");
  });

  test("sample matches in the pool branch (small population)", () => {
    expect(new PythonRandom(7).sample(pythonRange(0, 10), 4)).toEqual([5, 2, 6, 9]);
    expect(new PythonRandom(7).sample(pythonRange(0, 50), 10)).toEqual([20, 9, 25, 41, 3, 4, 34, 6, 23, 37]);
  });

  test("sample matches in the set branch (population above the set-size estimate)", () => {
    expect(new PythonRandom(7).sample(pythonRange(100, 1100), 10)).toEqual([431, 1070, 254, 504, 766, 149, 174, 940, 648, 196]);
    expect(new PythonRandom(9).sample(pythonRange(0, 30), 5)).toEqual([14, 19, 11, 8, 4]);
  });

  test("sample takes arrays and rejects k outside 0..n", () => {
    expect(new PythonRandom(7).sample(Array.from({ length: 10 }, (_, i) => `s${i}`), 4)).toEqual(["s5", "s2", "s6", "s9"]);
    expect(() => new PythonRandom(0).sample(pythonRange(0, 3), 4)).toThrow("Sample larger than population");
  });
});

describe("seed directives", () => {
  const stream = (name: string, split = "default", baseSeed = 0, specIndex = 0): SeedStream => ({ baseSeed, specIndex, name, split });

  test("the hash payload uses Python's list repr and gives the same RNG seed", () => {
    expect(pythonListRepr([0, 128, 1])).toBe("[0, 128, 1]");
    expect(seedRngSeed([0, 128, 1], stream("Sokoban"))).toBe(16401864384017650435n);
  });

  test("[0, 128, 1] with 128 episodes: VAGEN's FrozenLake eval seeds", () => {
    expect(directiveSeeds([0, 128, 1], 128, stream("FrozenLake"))).toEqual([
      89, 111, 13, 27, 120, 91, 126, 28, 69, 64, 87, 118, 107, 14, 2, 22, 55, 77, 29, 127, 33, 58, 24, 109, 1, 21, 4, 112, 5, 62,
      61, 106, 66, 117, 73, 3, 97, 96, 46, 59, 84, 75, 78, 119, 104, 99, 43, 125, 123, 98, 8, 68, 101, 7, 122, 20, 50, 45, 26, 9,
      34, 0, 108, 12, 47, 41, 16, 63, 94, 35, 74, 44, 92, 48, 25, 11, 105, 52, 53, 90, 23, 65, 39, 10, 110, 18, 116, 72, 93, 36,
      124, 81, 103, 30, 57, 128, 76, 88, 115, 121, 67, 19, 54, 42, 38, 95, 6, 60, 15, 49, 100, 85, 86, 114, 40, 17, 70, 71, 37, 32,
      79, 80, 102, 31, 51, 113, 56, 83,
    ]);
  });

  const cases: [SeedDirective, number, SeedStream, number[]][] = [
    [[10000, 10128, 1], 8, stream("Sokoban", "test"), [10028, 10052, 10038, 10046, 10022, 10081, 10027, 10072]],
    [[0, 5, 3], 12, stream("Sokoban"), [2, 5, 5, 5, 2, 4, 1, 1, 0, 0, 4, 3]],
    [[5], 3, stream("Sokoban"), [130220036, 317579614, 860990410]],
    [[3, 3], 2, stream("Sokoban"), [3, 3]],
    [[0, 100], 5, stream("Sokoban", "default", 7, 2), [48, 91, 34, 38, 93]],
  ];
  for (const [directive, count, where, expected] of cases) {
    test(`${pythonListRepr(directive)} x${count} (${where.name}, split ${where.split}, base ${where.baseSeed}, index ${where.specIndex})`, () => {
      expect(directiveSeeds(directive, count, where)).toEqual(expected);
    });
  }

  test("impossible directives are refused before drawing", () => {
    expect(() => directiveSeeds([0, 5, 1], 7, stream("Sokoban"))).toThrow("6 value(s) used at most 1 time(s) each give 6 seed(s), but 7 episode(s)");
    expect(() => directiveSeeds([5, 1], 2, stream("Sokoban"))).toThrow("hi (1) is below lo (5)");
    expect(() => directiveSeeds([0, 5, 0], 2, stream("Sokoban"))).toThrow("repeat limit k must be at least 1");
    expect(() => directiveSeeds([], 2, stream("Sokoban"))).toThrow("[a], [lo, hi] or [lo, hi, k]");
  });
});

describe("seed directives in an eval config", () => {
  const base = { output_dir: "x", model: { backend: "openai", base_url: "http://127.0.0.1:1/v1", model: "m" } };
  const config = (envs: Record<string, unknown>, run: Record<string, unknown> = {}) =>
    buildEvalPlan(validate(EvalConfig, { ...base, run, envs }), "e.yaml");
  const episodeSeedsForTag = (plan: EvalPlan, tag: string) => plan.envs.find((env) => env.tag === tag)!.seeds;

  test("seeds come from the directive, the env's position, its split and run.base_seed", () => {
    const c = config({
      other: { name: "FrozenLake", episodes: 2 },
      sokoban: { name: "Sokoban", episodes: 5, seed: [0, 100] },
      sokoban_test: { name: "Sokoban", episodes: 8, seed: [10000, 10128, 1], split: "test" },
    }, { base_seed: 7 });
    expect(episodeSeedsForTag(c, "other")).toEqual([0, 1]);
    expect(episodeSeedsForTag(c, "sokoban")).toEqual(directiveSeeds([0, 100], 5, { baseSeed: 7, specIndex: 1, name: "Sokoban", split: "default" }));
    expect(episodeSeedsForTag(c, "sokoban_test")).toEqual(directiveSeeds([10000, 10128, 1], 8, { baseSeed: 7, specIndex: 2, name: "Sokoban", split: "test" }));
    expect(episodeSeedsForTag(c, "sokoban_test")).not.toEqual([10028, 10052, 10038, 10046, 10022, 10081, 10027, 10072]);
  });

  test("VAGEN's Sokoban eval setting: first env, split test, base_seed 0", () => {
    const c = config({ sokoban: { name: "Sokoban", episodes: 8, seed: [10000, 10128, 1], split: "test" } });
    expect(episodeSeedsForTag(c, "sokoban")).toEqual([10028, 10052, 10038, 10046, 10022, 10081, 10027, 10072]);
  });

  test("defaults: base_seed 0, split default; a bare integer means [a]", () => {
    const c = config({ frozenlake: { name: "FrozenLake", episodes: 3, seed: 5 } });
    expect(c.config.run.base_seed).toBe(0);
    expect(c.config.envs.frozenlake!.split).toBe("default");
    expect(episodeSeedsForTag(c, "frozenlake")).toEqual(directiveSeeds([5], 3, { baseSeed: 0, specIndex: 0, name: "FrozenLake", split: "default" }));
  });

  test("a directive can't be combined with seed_start or seeds", () => {
    expect(() => config({ a: { name: "Sokoban", episodes: 2, seed: [0, 9, 1], seed_start: 3 } })).toThrow(
      'e.yaml: key "envs.a.seed": a seed directive and seed_start both choose the seeds; keep one of them',
    );
    expect(() => config({ a: { name: "Sokoban", episodes: 2, seed: [0, 9, 1], seeds: [1, 2] } })).toThrow("a seed directive and seeds both choose");
  });

  test("too few values for the repeat limit is a config error naming the key", () => {
    expect(() => config({ a: { name: "Sokoban", episodes: 12, seed: [0, 5, 1] } })).toThrow(
      'e.yaml: key "envs.a.seed": [0, 5, 1]: 6 value(s) used at most 1 time(s) each give 6 seed(s), but 12 episode(s) need one each',
    );
    expect(() => validate(EvalConfig, { ...base, envs: { a: { name: "Sokoban", episodes: 2, seed: [1, 2, 3, 4] } } })).toThrow("envs.a.seed");
    expect(() => validate(EvalConfig, { ...base, envs: { a: { name: "Sokoban", episodes: 2, seed: [0.5] } } })).toThrow("envs.a.seed");
  });

  test("directives that repeat a seed are refused (episode folders are per seed)", () => {
    expect(() => config({ a: { name: "Sokoban", episodes: 2, seed: [3, 3] } })).toThrow('e.yaml: key "envs.a": seed 3 comes up more than once');
    expect(() => config({ a: { name: "Sokoban", episodes: 12, seed: [0, 5, 3] } })).toThrow("seed 5 comes up more than once");
  });

  test("an env's seeds depend on its position and the base seed, as in VAGEN's list", () => {
    const c = config({ a: { name: "Sokoban", episodes: 2, seed: [0, 9, 1] } });
    const spec = { name: "Sokoban", config: {}, count: 2, seed: [0, 9, 1], maxTurns: 5 };
    expect(envSpecSeeds(spec, 0, 0)).toEqual(episodeSeedsForTag(c, "a"));
    expect(envSpecSeeds(spec, 1, 0)).toEqual(directiveSeeds([0, 9, 1], 2, { baseSeed: 0, specIndex: 1, name: "Sokoban", split: "default" }));
    expect(envSpecSeeds(spec, 0, 3)).toEqual(directiveSeeds([0, 9, 1], 2, { baseSeed: 3, specIndex: 0, name: "Sokoban", split: "default" }));
  });

  test("an env named by import path draws the same seeds from any folder (its file's base name and export key the stream)", () => {
    expect(seedStreamName("Sokoban")).toBe("Sokoban");
    expect(seedStreamName("./envs/digit-env.ts:DigitEnv")).toBe("digit-env.ts:DigitEnv");
    expect(seedStreamName("/home/a/run/digit-env.ts:DigitEnv")).toBe("digit-env.ts:DigitEnv");
    expect(seedStreamName("C:\\work\\digit-env.ts:DigitEnv")).toBe("digit-env.ts:DigitEnv");
    const at = (name: string) => envSpecSeeds({ name, config: {}, count: 4, seed: [0, 999, 1], maxTurns: 5 }, 0, 0);
    // as a config writes it, and as it is after resolution in two checkouts
    const seeds = at("./digit-env.ts:DigitEnv");
    expect(at("/tmp/a/test/training/digit-env.ts:DigitEnv")).toEqual(seeds);
    expect(at("/work/b/test/training/digit-env.ts:DigitEnv")).toEqual(seeds);
    // a different export or file is another stream
    expect(at("./digit-env.ts:OtherEnv")).not.toEqual(seeds);
  });
});
