/**
 * `vagen eval` with world-model rewards read by a judge that is down. The policy is a
 * fake server answering the BFS solution in main's wm format; the judge is a second
 * stand-in that answers 500 or never answers. Under `on_judge_error: score_zero` the
 * episodes finish, their state rewards are 0, and the failures are counted in each
 * episode's metrics.json, in summary.json, in the table, and told once as a warning;
 * under `fail` every such episode is an error (and the command exits 1).
 */
import { afterEach, describe, expect, test } from "bun:test";
import { existsSync, readFileSync, writeFileSync } from "node:fs";
import { join, resolve } from "node:path";
import { stringify } from "yaml";
import { createEnv } from "../../envs/registry.ts";
import { createClient } from "../../src/clients/config.ts";
import type { EvalConfig } from "../../src/evaluation/config.ts";
import type { EpisodeMetrics } from "../../src/evaluation/episode-metrics.ts";
import type { EvalEvent } from "../../src/evaluation/events.ts";
import { buildEvalPlan } from "../../src/evaluation/plan.ts";
import { runEvaluation } from "../../src/evaluation/runner.ts";
import { formatSummaryTable, summaryWarnings } from "../../src/evaluation/summary.ts";
import { startFakeJudge, type FakeJudge, type JudgeBehaviour } from "../rewards/fake-judge.ts";
import { solverAnswer } from "./answerers.ts";
import { type FakeServer, startFakeOpenAIServer } from "./fake-openai-server.ts";
import { evalConfig, fastModel, tempDir } from "./helpers.ts";

let policy: FakeServer | undefined;
let judge: FakeJudge | undefined;
let dir: { path: string; cleanup: () => void } | undefined;
afterEach(async () => {
  await policy?.stop();
  judge?.stop();
  dir?.cleanup();
  policy = judge = dir = undefined;
});

const SEEDS = [100, 101];

/** Sokoban in main's wm format with state estimation read by the stand-in judge. */
function sokobanEnvs(judgeUrl: string, onJudgeError?: "score_zero" | "fail"): Record<string, unknown> {
  const stateReward = {
    state_estimation: { enable: true, reward: 1 },
    judge_base_url: judgeUrl,
    judge_model: "judge",
    // Short: the hanging judge is given up on in 200 ms per attempt.
    judge: { timeout_s: 0.2, max_retries: 1, min_backoff_s: 0.01, max_backoff_s: 0.02 },
    ...(onJudgeError ? { on_judge_error: onJudgeError } : {}),
  };
  return {
    sokoban: { name: "Sokoban", config: { render_mode: "text", min_solution_steps: [1, 3], prompt_format: "wm", state_reward: stateReward }, episodes: SEEDS.length, seed_start: SEEDS[0], max_turns: 4 },
  };
}

function setup(behaviour: JudgeBehaviour): { out: string; policyUrl: string; judgeUrl: string } {
  policy = startFakeOpenAIServer({ answer: solverAnswer });
  judge = startFakeJudge(() => behaviour);
  dir = tempDir();
  return { out: join(dir.path, "run"), policyUrl: policy.baseUrl, judgeUrl: judge.baseUrl };
}

async function run(config: EvalConfig) {
  const events: EvalEvent[] = [];
  const result = await runEvaluation(buildEvalPlan(config), { client: createClient(config.model), createEnv, onEvent: (e) => events.push(e) });
  return { result, events, warnings: events.flatMap((e) => (e.type === "warning" ? [e] : [])) };
}

function readMetrics(out: string, seed: number): EpisodeMetrics {
  return JSON.parse(readFileSync(join(out, "sokoban", `seed_${seed}`, "metrics.json"), "utf8"));
}

describe("eval with a judge that answers 500", () => {
  test("score_zero: episodes finish with state rewards 0, and the failures are counted and told", async () => {
    const { out, policyUrl, judgeUrl } = setup({ kind: "status", status: 500 });
    const { result, warnings } = await run(evalConfig(out, policyUrl, sokobanEnvs(judgeUrl)));

    const summary = result.summary.envs.sokoban!;
    expect(summary.success_rate).toBe(1);
    expect(summary.error_episodes).toBe(0);
    expect(summary.state_reward!.state_estimation_reward).toBe(0);
    let requests = 0;
    for (const seed of SEEDS) {
      const metrics = readMetrics(out, seed);
      expect(metrics.finish_reason).toBe("done");
      expect(metrics.state_reward!.state_estimation_reward).toBe(0);
      // One state-estimation request per turn, every one of them failed.
      expect(metrics.judge).toMatchObject({ requests: metrics.num_turns, failures: metrics.num_turns, unparseable: 0 });
      expect(metrics.judge!.first_error).toContain(`${judgeUrl}/chat/completions`);
      expect(metrics.judge!.first_error).toContain("500");
      requests += metrics.num_turns;
    }
    expect(summary.judge).toEqual({ requests, failures: requests, unparseable: 0, episodes_with_failures: 2 });
    expect(JSON.parse(readFileSync(join(out, "summary.json"), "utf8")).envs.sokoban.judge).toEqual(summary.judge);

    // Told once for the run, when first seen, naming the episode, the endpoint and what to do.
    expect(warnings.length).toBe(1);
    expect(warnings[0]!.code).toBe("judge_failures");
    expect(warnings[0]!.message).toMatch(/^sokoban seed 10[01]: world-model judge failed \d+ of \d+ request\(s\); first error: http:\/\/127\.0\.0\.1:\d+\/v1\/chat\/completions: .*500/);
    expect(warnings[0]!.message).toContain("on_judge_error: fail");

    const table = formatSummaryTable(result.summary);
    expect(table).toMatch(/errors\s+judge_failures\n/);
    expect(table).toMatch(new RegExp(`sokoban\\s+2\\s+1\\.000.*\\s${requests}/${requests}\\n`));
    expect(summaryWarnings(result.summary)).toEqual([
      `warning: sokoban: world-model judge failed ${requests} of ${requests} request(s) in 2 episode(s); those state-reward sections scored 0; check the judge server (state_reward.judge_base_url), or set state_reward.on_judge_error: fail to stop instead`,
    ]);
  });

  test("fail: every episode is an error that names the judge and its status; the episode's record is kept", async () => {
    const { out, policyUrl, judgeUrl } = setup({ kind: "status", status: 500 });
    const { result, warnings } = await run(evalConfig(out, policyUrl, sokobanEnvs(judgeUrl, "fail")));
    expect(result.summary.envs.sokoban!.error_episodes).toBe(2);
    expect(result.summary.envs.sokoban!.success_rate).toBe(0);
    for (const seed of SEEDS) {
      const metrics = readMetrics(out, seed);
      expect(metrics.finish_reason).toBe("error");
      // An error counts as a failure, whatever the env said.
      expect(metrics.success).toBe(false);
      expect(metrics.error!.kind).toBe("judge_error");
      expect(metrics.error!.message).toStartWith(`world-model judge at ${judgeUrl}: `);
      expect(metrics.error!.message).toContain("500");
      expect(metrics.num_turns).toBeGreaterThan(0);
      expect(existsSync(join(out, "sokoban", `seed_${seed}`, "messages.json"))).toBe(true);
    }
    // The episode errors say it; no judge_failures warning on top.
    expect(warnings).toEqual([]);
  });
});

describe("eval with a judge that never answers", () => {
  test("fail: the judge's timeout ends the wait and the episodes are errors", async () => {
    const { out, policyUrl, judgeUrl } = setup({ kind: "hang" });
    const { result } = await run(evalConfig(out, policyUrl, sokobanEnvs(judgeUrl, "fail"), {}, { max_concurrent_episodes: 2 }));
    expect(result.summary.envs.sokoban!.error_episodes).toBe(2);
    expect(readMetrics(out, SEEDS[0]!).error!.message).toMatch(/no complete response within 200 ms/);
  });
});

describe("vagen eval (subprocess) with a failing judge", () => {
  const MAIN = join(resolve(import.meta.dir, "../.."), "src/cli/main.ts");

  async function cli(onJudgeError?: "score_zero" | "fail") {
    const { out, policyUrl, judgeUrl } = setup({ kind: "status", status: 500 });
    const configPath = join(dir!.path, "eval.yaml");
    writeFileSync(configPath, stringify({ output_dir: out, model: fastModel(policyUrl), run: { max_concurrent_episodes: 2 }, envs: sokobanEnvs(judgeUrl, onJudgeError) }));
    const proc = Bun.spawn(["bun", MAIN, "eval", configPath, "--no-tui", "--no-progress"], { stdout: "pipe", stderr: "pipe", env: { ...process.env, NO_COLOR: "1" } });
    const [code, stdout, stderr] = await Promise.all([proc.exited, new Response(proc.stdout).text(), new Response(proc.stderr).text()]);
    return { code, stdout, stderr };
  }

  test("score_zero: exit 0, the warning in the log, the counts in the table and under it", async () => {
    const { code, stdout, stderr } = await cli();
    expect(code).toBe(0);
    expect(stderr.match(/world-model judge failed/g)?.length).toBe(1);
    expect(stdout).toMatch(/judge_fail\n/);
    expect(stdout).toMatch(/\nwarning: sokoban: world-model judge failed (\d+) of \1 request\(s\) in 2 episode\(s\)/);
  });

  test("fail: exit 1, as for any episode error", async () => {
    const { code, stderr } = await cli("fail");
    expect(code).toBe(1);
    expect(stderr).toContain("2 of 2 episodes ended in an error");
    expect(stderr).toMatch(/sokoban seed 100: error, .*\(world-model judge at http:\/\/127\.0\.0\.1:\d+\/v1: 1 of 1 request\(s\) failed/);
  });
});
