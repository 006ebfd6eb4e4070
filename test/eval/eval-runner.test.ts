import { afterEach, describe, expect, test } from "bun:test";
import { existsSync, readdirSync, readFileSync, statSync } from "node:fs";
import { join } from "node:path";
import { decodePng } from "../../src/core/png.ts";
import { createEnv } from "../../envs/registry.ts";
import { createClient } from "../../src/clients/config.ts";
import { imageToDataUrl } from "../../src/clients/openai-wire.ts";
import { validate } from "../../src/config/index.ts";
import { EvalConfig } from "../../src/evaluation/config.ts";
import type { EpisodeMetrics } from "../../src/evaluation/episode-metrics.ts";
import type { EvalEventListener } from "../../src/evaluation/events.ts";
import { buildEvalPlan, envSpecSeeds } from "../../src/evaluation/plan.ts";
import { runEvaluation } from "../../src/evaluation/runner.ts";
import { formatSummaryTable } from "../../src/evaluation/summary.ts";
import { garbageAnswer, imageLookupAnswer, sokobanSolution, solverAnswer, wmAnswer } from "./answerers.ts";
import { type FakeServer, type FakeServerOptions, imageUrls, startFakeOpenAIServer, type WireRequest } from "./fake-openai-server.ts";
import { evalConfig, FROZENLAKE_TEXT, SOKOBAN_TEXT, tempDir } from "./helpers.ts";

let server: FakeServer | undefined;
let dir: { path: string; cleanup: () => void } | undefined;
afterEach(async () => {
  await server?.stop();
  server = undefined;
  dir?.cleanup();
  dir = undefined;
});

function setup(options: FakeServerOptions): { server: FakeServer; out: string } {
  server = startFakeOpenAIServer(options);
  dir = tempDir();
  return { server, out: join(dir.path, "run") };
}

const TEXT_ENVS = {
  sokoban: { name: "Sokoban", config: SOKOBAN_TEXT, episodes: 3, seed_start: 100, max_turns: 5 },
  frozenlake: { name: "FrozenLake", config: FROZENLAKE_TEXT, episodes: 3, seed_start: 7, max_turns: 5, harness: "no_concat" },
};

async function run(config: EvalConfig, extra: { signal?: AbortSignal; onEvent?: EvalEventListener } = {}) {
  return runEvaluation(buildEvalPlan(config), { client: createClient(config.model), createEnv, ...extra });
}

function readMetrics(out: string, tag: string, seed: number): EpisodeMetrics {
  return JSON.parse(readFileSync(join(out, tag, `seed_${seed}`, "metrics.json"), "utf8"));
}

describe("vagen eval runner over real HTTP", () => {
  test("a server answering the BFS solution solves every Sokoban and FrozenLake episode", async () => {
    const { server, out } = setup({ answer: solverAnswer });
    const result = await run(evalConfig(out, server.baseUrl, TEXT_ENVS));
    expect(result.aborted).toBe(false);
    expect(result.ran).toBe(6);
    for (const tag of ["sokoban", "frozenlake"]) {
      const s = result.summary.envs[tag]!;
      expect(s.episodes).toBe(3);
      expect(s.success_rate).toBe(1);
      expect(s.format_error_rate).toBe(0);
      expect(s.error_episodes).toBe(0);
      expect(s.mean_turns).toBeGreaterThanOrEqual(1);
      expect(s.mean_reward).toBeGreaterThan(1);
    }
    expect(result.summary.complete).toBe(true);
    expect(JSON.parse(readFileSync(join(out, "summary.json"), "utf8"))).toEqual(JSON.parse(JSON.stringify(result.summary)));

    const ep = join(out, "sokoban", "seed_100");
    expect(readdirSync(ep).sort()).toEqual(["images", "messages.json", "metrics.json", "transcript.md"]);
    const metrics = readMetrics(out, "sokoban", 100);
    expect(metrics).toMatchObject({ env_name: "Sokoban", tag: "sokoban", seed: 100, harness: "concat", finish_reason: "done", terminated: true, success: true });
    expect(metrics.infos.length).toBe(metrics.num_turns + 1);
    expect(metrics.cumulative_reward).toBeCloseTo(metrics.rewards.reduce((a, b) => a + b, 0));
    const messages = JSON.parse(readFileSync(join(ep, "messages.json"), "utf8"));
    expect(messages.map((m: { role: string }) => m.role).slice(0, 3)).toEqual(["system", "user", "assistant"]);
    expect(messages.length).toBe(2 + 2 * metrics.num_turns);
    const transcript = readFileSync(join(ep, "transcript.md"), "utf8");
    expect(transcript).toContain("# Sokoban (sokoban), seed 100");
    expect(transcript).toContain("<answer>");
    expect(readMetrics(out, "frozenlake", 7).harness).toBe("no_concat");
    expect(formatSummaryTable(result.summary)).toMatch(/^env\s+episodes\s+success_rate.*\nsokoban\s+3\s+1\.000/);
  });

  test("a server answering garbage gets success 0, every turn a format error, and no crash", async () => {
    const { server, out } = setup({ answer: garbageAnswer });
    const result = await run(evalConfig(out, server.baseUrl, TEXT_ENVS));
    for (const tag of ["sokoban", "frozenlake"]) {
      const s = result.summary.envs[tag]!;
      expect(s).toMatchObject({ episodes: 3, success_rate: 0, mean_reward: 0, mean_turns: 5, format_error_rate: 1, error_episodes: 0 });
    }
    expect(readMetrics(out, "sokoban", 101).finish_reason).toBe("max_turns");
  });

  test("429s and 500s some of the time: retried, and the results are exactly the fault-free ones", async () => {
    const clean = setup({ answer: solverAnswer });
    const reference = await run(evalConfig(clean.out, clean.server.baseUrl, TEXT_ENVS));
    await server!.stop();
    const requestsWithoutFaults = clean.server.requests.length;

    // Every distinct request fails twice (429 with Retry-After, then 500) before it is
    // answered. Keyed by content rather than arrival order, so concurrency can't make one
    // request unlucky enough to run out of retries.
    const attempts = new Map<string, number>();
    server = startFakeOpenAIServer({
      answer: solverAnswer,
      fault: (_n, request) => {
        const key = JSON.stringify(request.messages);
        const attempt = attempts.get(key) ?? 0;
        attempts.set(key, attempt + 1);
        return attempt === 0 ? { status: 429, retryAfterS: 0.01 } : attempt === 1 ? { status: 500 } : undefined;
      },
    });
    const out = join(dir!.path, "flaky");
    const result = await run(evalConfig(out, server.baseUrl, TEXT_ENVS));
    const statuses = server.requests.map((r) => r.status);
    expect(statuses.filter((s) => s === 200).length).toBe(requestsWithoutFaults);
    expect(statuses.filter((s) => s === 429).length).toBe(requestsWithoutFaults);
    expect(statuses.filter((s) => s === 500).length).toBe(requestsWithoutFaults);
    for (const tag of ["sokoban", "frozenlake"]) {
      const { created_at: _a, ...expected } = { ...reference.summary.envs[tag]!, created_at: 0 };
      expect(result.summary.envs[tag]).toEqual(expected);
    }
  });

  test("a slow server trips the timeout; the request is retried and the run completes", async () => {
    // The first attempt of every distinct request stalls past the 100 ms timeout.
    const seen = new Set<string>();
    const firstAttemptSlow = (_n: number, request: WireRequest) => {
      const key = JSON.stringify(request.messages);
      if (seen.has(key)) return undefined;
      seen.add(key);
      return { delayMs: 400 };
    };
    const { server, out } = setup({ answer: solverAnswer, fault: firstAttemptSlow });
    const retries: string[] = [];
    const config = evalConfig(out, server.baseUrl, { sokoban: TEXT_ENVS.sokoban }, { timeout_s: 0.1 });
    const result = await runEvaluation(buildEvalPlan(config), { client: createClient(config.model, { onRetry: (e) => retries.push(e.reason) }), createEnv });
    expect(result.summary.envs.sokoban!.success_rate).toBe(1);
    expect(retries.length).toBe(seen.size);
    expect(retries.every((r) => r.includes("no complete response within 100 ms"))).toBe(true);
  });

  test("resume skips finished episodes and reruns ones that ended in a model error", async () => {
    const { server, out } = setup({ answer: solverAnswer });
    const two = { sokoban: { ...TEXT_ENVS.sokoban, episodes: 2 } };
    const first = await run(evalConfig(out, server.baseUrl, two));
    expect(first.ran).toBe(2);
    const before = statSync(join(out, "sokoban", "seed_100", "metrics.json")).mtimeMs;
    const requestsAfterFirst = server.requests.length;

    const four = { sokoban: { ...TEXT_ENVS.sokoban, episodes: 4 } };
    const second = await run(evalConfig(out, server.baseUrl, four));
    expect(second.skipped).toBe(2);
    expect(second.ran).toBe(2);
    expect(second.summary.envs.sokoban).toMatchObject({ episodes: 4, planned: 4, success_rate: 1 });
    expect(statSync(join(out, "sokoban", "seed_100", "metrics.json")).mtimeMs).toBe(before);
    // Only seeds 102 and 103 were asked about.
    const secondRunRequests = server.requests.slice(requestsAfterFirst);
    expect(secondRunRequests.length).toBeGreaterThan(0);

    const third = await run(evalConfig(out, server.baseUrl, four));
    expect(third.ran).toBe(0);
    expect(third.skipped).toBe(4);
  });

  test("episodes that failed with a model error are recorded, counted, and rerun on resume", async () => {
    const { server: rejecting, out } = setup({ answer: solverAnswer, fault: () => ({ status: 400 }) });
    const config = evalConfig(out, rejecting.baseUrl, { sokoban: { ...TEXT_ENVS.sokoban, episodes: 2 } });
    const failed = await run(config);
    expect(failed.summary.envs.sokoban).toMatchObject({ episodes: 2, success_rate: 0, error_episodes: 2 });
    expect(readMetrics(out, "sokoban", 100)).toMatchObject({ finish_reason: "model_error", num_turns: 0 });
    expect(readMetrics(out, "sokoban", 100).error?.message).toContain("HTTP 400");

    await rejecting.stop();
    server = startFakeOpenAIServer({ answer: solverAnswer });
    const rerun = await run(evalConfig(out, server.baseUrl, { sokoban: { ...TEXT_ENVS.sokoban, episodes: 2 } }));
    expect(rerun.ran).toBe(2);
    expect(rerun.summary.envs.sokoban).toMatchObject({ episodes: 2, success_rate: 1, error_episodes: 0 });
  });

  test("an abort stops launching, drops in-flight episodes, keeps finished ones and summarizes them", async () => {
    const { server, out } = setup({ answer: solverAnswer, fault: (n) => (n >= 1 ? { delayMs: 30 } : undefined) });
    const controller = new AbortController();
    const onEvent: EvalEventListener = (event) => {
      if (event.type === "episode_finished") controller.abort();
    };
    const config = evalConfig(out, server.baseUrl, { sokoban: { ...TEXT_ENVS.sokoban, episodes: 6 } }, {}, { max_concurrent_episodes: 2 });
    const result = await run(config, { signal: controller.signal, onEvent });
    expect(result.aborted).toBe(true);
    expect(result.ran).toBe(1);
    expect(result.summary.complete).toBe(false);
    expect(result.summary.envs.sokoban).toMatchObject({ episodes: 1, planned: 6 });
    const folders = readdirSync(join(out, "sokoban"));
    expect(folders.length).toBe(1);
    expect(existsSync(join(out, "summary.json"))).toBe(true);
  });

  test("vision: observations travel as PNG data URLs and are saved as PNG files", async () => {
    const config = { render_mode: "vision", min_solution_steps: [1, 5], max_actions_per_step: 10 };
    // The answer table: each seed's first image -> its whole BFS solution (one turn).
    const table = new Map<string, string>();
    const textEnv = await createEnv("Sokoban", { ...SOKOBAN_TEXT });
    const visionEnv = await createEnv("Sokoban", config);
    for (const seed of [300, 301]) {
      const image = (await visionEnv.reset(seed)).obs.images[0]!;
      const grid = (await textEnv.reset(seed)).obs.text;
      table.set(imageToDataUrl(image), wmAnswer(sokobanSolution(/\n([\s\S]*?)\nDecide/.exec(grid)![1]!)));
    }
    const { server, out } = setup({ answer: imageLookupAnswer(table) });
    const result = await run(evalConfig(out, server.baseUrl, { sokoban_vision: { name: "Sokoban", config, episodes: 2, seed_start: 300, max_turns: 2 } }));
    expect(result.summary.envs.sokoban_vision!.success_rate).toBe(1);
    expect(imageUrls(server.requests[0]!.body).length).toBe(1);
    const images = join(out, "sokoban_vision", "seed_300", "images");
    expect(readdirSync(images).sort()).toEqual(["obs_00_0.png", "obs_01_0.png"]);
    const png = decodePng(readFileSync(join(images, "obs_00_0.png")));
    expect([png.width, png.height]).toEqual([96, 96]);
    const messages = readFileSync(join(out, "sokoban_vision", "seed_300", "messages.json"), "utf8");
    expect(messages).toContain('"path": "images/obs_00_0.png"');
    expect(messages).not.toContain("data:image");
  });
});

describe("eval config", () => {
  test("names the key and what was expected", () => {
    const base = { output_dir: "x", model: { backend: "openai", base_url: "http://127.0.0.1:1/v1", model: "m" } };
    expect(() => validate(EvalConfig, { ...base, envs: { a: { name: "Sokoban" } } }, { file: "e.yaml" })).toThrow('key "envs.a.episodes"');
    expect(() => validate(EvalConfig, { ...base, envs: { a: { name: "Sokoban", episodes: 2, max_turn: 3 } } }, { file: "e.yaml" })).toThrow(
      'unknown key "envs.a.max_turn" (did you mean "max_turns"?)',
    );
    const fewSeeds = validate(EvalConfig, { ...base, envs: { a: { name: "Sokoban", episodes: 3, seeds: [1, 2] } } });
    expect(() => buildEvalPlan(fewSeeds, "e.yaml")).toThrow('e.yaml: key "envs.a.seeds": 2 seed(s) listed but episodes is 3');
    expect(() => buildEvalPlan(validate(EvalConfig, { ...base, envs: {} }), "e.yaml")).toThrow('e.yaml: key "envs": no envs to evaluate');
    const spec = { name: "Sokoban", config: {}, maxTurns: 5 };
    expect(envSpecSeeds({ ...spec, count: 2, seedList: [1, 2] }, 0, 0)).toEqual([1, 2]);
    expect(envSpecSeeds({ ...spec, count: 3, seedStart: 5 }, 0, 0)).toEqual([5, 6, 7]);
    expect(() => validate(EvalConfig, { ...base, model: { ...base.model, base_url: "localhost" }, envs: {} })).toThrow("model.base_url");
  });
});
