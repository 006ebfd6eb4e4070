/**
 * The plan of an eval config, against the episodes written out by hand; and the env-spec
 * seeding the trainer's dataset shares with it.
 */
import { describe, expect, test } from "bun:test";
import { join } from "node:path";
import { validate } from "../../src/config/index.ts";
import { EvalConfig } from "../../src/evaluation/config.ts";
import { buildEvalPlan, type EnvSpec, planEnvSpecs } from "../../src/evaluation/plan.ts";

const OUT = "/runs/eval/plan";
const MODEL = { backend: "openai", base_url: "http://127.0.0.1:1/v1", model: "m", sampling: { temperature: 0.5, max_tokens: 100 } };

describe("buildEvalPlan", () => {
  test("every episode's env, config, seed, harness, sampling and folder, in config order", () => {
    const config = validate(EvalConfig, {
      output_dir: OUT,
      model: MODEL,
      run: { max_concurrent_episodes: 3, resume: false, base_seed: 0 },
      envs: {
        // VAGEN's Sokoban eval setting (first env, split test): seeds printed by VAGEN's Python.
        sokoban: { name: "Sokoban", config: { render_mode: "text" }, episodes: 3, seed: [10000, 10128, 1], split: "test", max_turns: 4 },
        lake: {
          name: "FrozenLake",
          config: { size: 4, image_placeholder: "<img>" },
          episodes: 2,
          seed_start: 40,
          harness: { name: "compact", history_turns: 2 },
          sampling: { max_tokens: 300, stop: ["</answer>"] },
        },
        listed: { name: "FrozenLake", episodes: 2, seeds: [9, 3, 5], harness: "no_concat" },
      },
    });
    const plan = buildEvalPlan(config, "e.yaml");

    const sokoban = {
      tag: "sokoban",
      name: "Sokoban",
      config: { render_mode: "text" },
      count: 3,
      seed: [10000, 10128, 1],
      seedList: undefined,
      seedStart: undefined,
      split: "test",
      maxTurns: 4,
      harness: { name: "concat", options: {} },
      sampling: { temperature: 0.5, maxTokens: 100 },
      imagePlaceholder: undefined,
      seeds: [10028, 10052, 10038],
    };
    const lake = {
      tag: "lake",
      name: "FrozenLake",
      config: { size: 4, image_placeholder: "<img>" },
      count: 2,
      seed: undefined,
      seedList: undefined,
      seedStart: 40,
      split: "default",
      maxTurns: 5,
      harness: { name: "compact", options: { history_turns: 2 } },
      // The env's sampling merged over the model's.
      sampling: { temperature: 0.5, maxTokens: 300, stop: ["</answer>"] },
      imagePlaceholder: "<img>",
      seeds: [40, 41],
    };
    const listed = {
      tag: "listed",
      name: "FrozenLake",
      config: {},
      count: 2,
      seed: undefined,
      seedList: [9, 3, 5],
      seedStart: undefined,
      split: "default",
      maxTurns: 5,
      harness: { name: "no_concat", options: {} },
      sampling: { temperature: 0.5, maxTokens: 100 },
      imagePlaceholder: undefined,
      // The first `episodes` of the list.
      seeds: [9, 3],
    };
    expect(plan.envs).toEqual([sokoban, lake, listed]);
    expect(plan.episodes.map((e) => ({ tag: e.env.tag, seed: e.seed, dir: e.dir }))).toEqual([
      { tag: "sokoban", seed: 10028, dir: join(OUT, "sokoban", "seed_10028") },
      { tag: "sokoban", seed: 10052, dir: join(OUT, "sokoban", "seed_10052") },
      { tag: "sokoban", seed: 10038, dir: join(OUT, "sokoban", "seed_10038") },
      { tag: "lake", seed: 40, dir: join(OUT, "lake", "seed_40") },
      { tag: "lake", seed: 41, dir: join(OUT, "lake", "seed_41") },
      { tag: "listed", seed: 9, dir: join(OUT, "listed", "seed_9") },
      { tag: "listed", seed: 3, dir: join(OUT, "listed", "seed_3") },
    ]);
    // Each episode points at its env's one record, not a copy.
    expect(plan.episodes[4]!.env).toBe(plan.envs[1]!);
    expect(plan).toMatchObject({ config, outputDir: OUT, resume: false, maxConcurrentEpisodes: 3 });
  });

  test("a config mistake across keys names the file and key", () => {
    const config = (envs: Record<string, unknown>) => validate(EvalConfig, { output_dir: OUT, model: MODEL, envs });
    expect(() => buildEvalPlan(config({}), "e.yaml")).toThrow('e.yaml: key "envs": no envs to evaluate');
    expect(() => buildEvalPlan(config({ a: { name: "X", episodes: 3, seeds: [1, 2] } }), "e.yaml")).toThrow(
      'e.yaml: key "envs.a.seeds": 2 seed(s) listed but episodes is 3',
    );
    expect(() => buildEvalPlan(config({ a: { name: "X", episodes: 2, seed: [0, 9], seed_start: 1 } }), "e.yaml")).toThrow(
      'e.yaml: key "envs.a.seed": a seed directive and seed_start both choose the seeds',
    );
    expect(() => buildEvalPlan(config({ a: { name: "X", episodes: 3, seed: [4, 5, 1] } }), "e.yaml")).toThrow(
      'e.yaml: key "envs.a.seed": [4, 5, 1]: 2 value(s) used at most 1 time(s) each give 2 seed(s), but 3 episode(s) need one each',
    );
    expect(() => buildEvalPlan(config({ a: { name: "X", episodes: 2, seeds: [7, 7] } }), "e.yaml")).toThrow('e.yaml: key "envs.a": seed 7 comes up more than once');
  });
});

describe("planEnvSpecs (the trainer's dataset of env specs)", () => {
  test("VAGEN's n_envs / seed / seed_list / max_turns, spec by spec, each episode with its own spec", () => {
    interface DatasetSpec extends EnvSpec {
      responseLength: number;
    }
    const specs: DatasetSpec[] = [
      // seed_list wins over seed, as in VAGEN.
      { name: "FrozenLake", config: { size: 4 }, count: 2, seed: [0, 100], seedList: [11, 12, 13], maxTurns: 3, responseLength: 64 },
      // [lo, hi, k] with k = 2 may repeat a value: training allows that.
      { name: "Sokoban", config: {}, count: 4, seed: [1, 2, 2], maxTurns: 5, responseLength: 128 },
      { name: "Sokoban", config: {}, count: 2, seedStart: 7, maxTurns: 5, responseLength: 128 },
    ];
    const episodes = planEnvSpecs(specs, 0);
    expect(episodes.map((e) => [e.specIndex, e.index, e.seed])).toEqual([
      [0, 0, 11],
      [0, 1, 12],
      // Four draws of {1, 2}, each value at most twice: both twice, in the hash's order.
      [1, 0, expect.any(Number)],
      [1, 1, expect.any(Number)],
      [1, 2, expect.any(Number)],
      [1, 3, expect.any(Number)],
      [2, 0, 7],
      [2, 1, 8],
    ]);
    expect(episodes.slice(2, 6).map((e) => e.seed).sort()).toEqual([1, 1, 2, 2]);
    expect(episodes[3]!.spec).toBe(specs[1]!);
    expect(episodes[0]!.spec.responseLength).toBe(64);
  });

  test("the same specs seed the same in eval and training: position, split and base seed feed the hash", () => {
    const spec: EnvSpec = { name: "Sokoban", config: {}, count: 3, seed: [10000, 10128, 1], split: "test", maxTurns: 5 };
    expect(planEnvSpecs([spec]).map((e) => e.seed)).toEqual([10028, 10052, 10038]);
    const second = planEnvSpecs([{ ...spec, seed: [0, 1] }, spec]).filter((e) => e.specIndex === 1).map((e) => e.seed);
    expect(second).not.toEqual([10028, 10052, 10038]);
    expect(planEnvSpecs([spec], 1).map((e) => e.seed)).not.toEqual([10028, 10052, 10038]);
  });

  test("errors name the spec as the caller says", () => {
    const spec: EnvSpec = { name: "Sokoban", config: {}, count: 3, seedList: [1], maxTurns: 5 };
    expect(() => planEnvSpecs([spec])).toThrow("env spec 0: 1 seed(s) listed but episodes is 3");
    expect(() => planEnvSpecs([spec], 0, () => 't.yaml: key "data.train.sokoban.seed_list"')).toThrow('t.yaml: key "data.train.sokoban.seed_list": 1 seed(s)');
  });
});
