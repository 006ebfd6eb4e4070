/**
 * A judge that is down: answering 500, refusing connections, or never answering. Under
 * `on_judge_error: score_zero` the sections score 0 and the failure is counted with its
 * message; under `fail` the scorer (and so a training step's hook) throws a VagenError
 * naming the judge and the cause.
 */
import { afterEach, describe, expect, test } from "bun:test";
import * as v from "valibot";
import { SOKOBAN_STATE_REWARD_SPEC as SPEC } from "../../envs/sokoban/index.ts";
import { validate } from "../../src/config/index.ts";
import { VagenError } from "../../src/core/errors.ts";
import type { EpisodeRecord } from "../../src/harness/types.ts";
import { stateRewardHook } from "../../src/rewards/episodes.ts";
import { JudgeFailedError, judgeTrouble } from "../../src/rewards/judge-trouble.ts";
import { StateRewardConfig } from "../../src/rewards/config.ts";
import { judgeMetrics, judgeStatsOf, StateRewardScorer } from "../../src/rewards/state-reward.ts";
import { refusedJudgeUrl, startFakeJudge, type FakeJudge, type JudgeBehaviour } from "./fake-judge.ts";
import { config, gridState, wm } from "./helpers.ts";

const before = gridState([2, 2], [["box", [3, 2]], ["target", [4, 2]]]);
const after = gridState([3, 2], [["box", [4, 2]], ["target", [4, 2]]]);
const turn = (perception: string) => ({ response: wm(perception, "p"), stateBefore: before, stateAfter: after });

let judge: FakeJudge | undefined;
afterEach(() => {
  judge?.stop();
  judge = undefined;
});

/** Short timeouts and backoffs: a down judge is given up on in milliseconds. */
const FAST = { timeout_s: 0.2, max_retries: 1, min_backoff_s: 0.01, max_backoff_s: 0.02 };

function judgeConfig(url: string, extra: Record<string, unknown> = {}) {
  return config({ state_estimation: { enable: true, reward: 1 }, judge_base_url: url, judge_model: "fake-judge", judge: FAST, ...extra });
}

function served(behaviour: JudgeBehaviour, extra: Record<string, unknown> = {}): StateRewardScorer {
  judge = startFakeJudge(() => behaviour);
  return StateRewardScorer.create(judgeConfig(judge.baseUrl, extra), SPEC, {});
}

describe("on_judge_error: score_zero (the default)", () => {
  test("a judge answering 500: the section scores 0, the failure is counted with the server's status and the endpoint", async () => {
    const scorer = served({ kind: "status", status: 500 });
    expect(scorer.config.on_judge_error).toBe("score_zero");
    const results = await scorer.scoreTurns([turn("one"), turn("two")]);
    expect(results.map((r) => [r.sections[0]!.status, r.total])).toEqual([
      ["judge_failed", 0],
      ["judge_failed", 0],
    ]);
    const error = results[0]!.sections[0]!.judgeError!;
    expect(error).toContain(`${judge!.baseUrl}/chat/completions`);
    expect(error).toContain("500");
    // The first attempt and its one retry, for each request.
    expect(judge!.attempts.get("one")).toBe(2);
    expect(judgeStatsOf(results, scorer.config)).toEqual({ requests: 2, failures: 2, unparseable: 0, firstError: error });
    const stats = scorer.takeStats();
    expect(stats).toEqual({ requests: 2, failures: 2, unparseable: 0, firstError: error });
  });

  test("a judge that never answers: the configured timeout ends each attempt", async () => {
    const scorer = served({ kind: "hang" });
    const [result] = await scorer.scoreTurns([turn("stuck")]);
    expect(result!.sections[0]!.status).toBe("judge_failed");
    expect(result!.sections[0]!.judgeError).toContain("no complete response within 200 ms");
  });

  test("a refused connection is a failure too", async () => {
    const url = refusedJudgeUrl();
    const scorer = StateRewardScorer.create(judgeConfig(url), SPEC, {});
    const [result] = await scorer.scoreTurns([turn("nobody home")]);
    expect(result!.sections[0]!.status).toBe("judge_failed");
    expect(result!.sections[0]!.judgeError).toContain(url);
  });
});

describe("on_judge_error: fail", () => {
  test("a 500 makes scoreTurns throw a VagenError naming the judge URL and the error", async () => {
    const scorer = served({ kind: "status", status: 500 }, { on_judge_error: "fail" });
    const error = await scorer.scoreTurns([turn("one"), turn("two")]).catch((err: unknown) => err);
    expect(error).toBeInstanceOf(JudgeFailedError);
    expect(error).toBeInstanceOf(VagenError);
    const { message, hint } = error as JudgeFailedError;
    expect(message).toStartWith(`world-model judge at ${judge!.baseUrl}: 2 of 2 request(s) failed after their retries: `);
    expect(message).toContain("500");
    expect(hint).toContain("on_judge_error: score_zero");
  });

  test("a judge that hangs fails on the timeout", async () => {
    const scorer = served({ kind: "hang" }, { on_judge_error: "fail" });
    await expect(scorer.scoreTurns([turn("stuck")])).rejects.toThrow(/world-model judge at http:\/\/127\.0\.0\.1:\d+\/v1: 1 of 1 .*no complete response within 200 ms/);
  });

  test("a judge that answers is unaffected; an unparseable reply still scores 0 without failing", async () => {
    const scorer = served({ kind: "answer", reply: "no JSON here" }, { on_judge_error: "fail" });
    const [result] = await scorer.scoreTurns([turn("fine")]);
    expect(result!.sections[0]!.status).toBe("unparseable");
  });

  test("the rollout hook (a training step's scoring) rejects, and reports no metrics for the failed round", async () => {
    const scorer = served({ kind: "status", status: 503 }, { on_judge_error: "fail" });
    const reported: Record<string, number>[] = [];
    const hook = stateRewardHook(scorer, (ids) => ids.map((_, k) => k + 1), (metrics) => reported.push(metrics));
    const record: EpisodeRecord = {
      harness: "concat",
      rowPerTurn: false,
      seed: 0,
      systemPrompt: { text: "", images: [] },
      initialObservation: { text: "", images: [] },
      resetInfo: { state: before },
      turns: [
        {
          index: 1,
          prompt: [],
          completion: { text: wm("the box", "p"), finishReason: "stop", usage: { promptTokens: 1, completionTokens: 1 }, tokenIds: [1, 2, 3] },
          reward: 0,
          done: true,
          info: { state: after },
          observation: { text: "", images: [] },
        },
      ],
      finishReason: "done",
      totalReward: 0,
    };
    await expect(hook([record])).rejects.toThrow(new RegExp(`world-model judge at ${judge!.baseUrl.replace(/[./]/g, "\\$&")}: 1 of 1 .*503`));
    expect(reported).toEqual([]);
    expect(scorer.takeStats()).toEqual({ requests: 0, failures: 0, unparseable: 0 });
  });

  test("the key is checked: anything but score_zero or fail names the key and both values", () => {
    const schema = v.object({ state_reward: StateRewardConfig });
    expect(() => validate(schema, { state_reward: { on_judge_error: "ignore" } }, { file: "run.yaml" })).toThrow('run.yaml: key "state_reward.on_judge_error": got "ignore" (string), expected ("score_zero" | "fail")');
  });
});

describe("judgeTrouble: the warning a run shows", () => {
  test("reads every prefixed failure counter with its requests, quotes the first error", () => {
    const metrics = {
      ...prefixed("train/lake/", judgeMetrics({ requests: 8, failures: 3, unparseable: 1 })),
      ...prefixed("train/box/", judgeMetrics({ requests: 4, failures: 0, unparseable: 0 })),
      ...prefixed("val/lake/", judgeMetrics({ requests: 2, failures: 2, unparseable: 0 })),
      "train/lake/success_rate": 0.5,
    };
    const trouble = judgeTrouble(metrics, "http://judge:8000/v1/chat/completions: HTTP 500");
    expect(trouble).toEqual({
      code: "judge_failures",
      message:
        "world-model judge failed 3 of 8 request(s) (train/lake), 2 of 2 request(s) (val/lake); first error: http://judge:8000/v1/chat/completions: HTTP 500; " +
        "those state-reward sections scored 0; check the judge server (state_reward.judge_base_url), or set state_reward.on_judge_error: fail to stop instead",
    });
    expect(judgeTrouble(judgeMetrics({ requests: 5, failures: 1, unparseable: 0 }))!.message).toStartWith("world-model judge failed 1 of 5 request(s); those");
  });

  test("nothing failed, or no judge at all: no warning", () => {
    expect(judgeTrouble(prefixed("train/lake/", judgeMetrics({ requests: 8, failures: 0, unparseable: 8 })))).toBeUndefined();
    expect(judgeTrouble({ "train/lake/success_rate": 1 })).toBeUndefined();
    expect(judgeTrouble({ "train/lake/state_reward/judge_failures": Number.NaN })).toBeUndefined();
  });
});

function prefixed(prefix: string, metrics: Record<string, number>): Record<string, number> {
  return Object.fromEntries(Object.entries(metrics).map(([k, x]) => [`${prefix}${k}`, x]));
}
