/**
 * The judge path against `vagen serve` itself (the tiny random-weight Qwen2.5-VL fixture
 * on the CPU, behind an API key): the requests the judge makes are ones vagen serve
 * accepts, and a model that answers nonsense only costs those sections their score.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { SOKOBAN_STATE_REWARD_SPEC as SPEC } from "../../envs/sokoban/index.ts";
import type { LoadedEngine } from "../../src/engine/load.ts";
import { StateRewardScorer } from "../../src/rewards/state-reward.ts";
import { loadFixtureEngine, startTestServer, type TestServer } from "../serve/serve-fixture.ts";
import { config, gridState, wm } from "./helpers.ts";

let loaded: LoadedEngine;
let server: TestServer;
beforeAll(() => {
  loaded = loadFixtureEngine();
  server = startTestServer(loaded, { apiKey: "judge-key-for-test" });
});
afterAll(async () => {
  server.stop();
  await loaded.close();
});

describe("a judge served by vagen serve", () => {
  test("batched requests are accepted; a nonsense reply is unparseable, scores 0 and is counted", async () => {
    const cfg = config({
      state_estimation: { enable: true, reward: 1 },
      transition_prediction: { enable: true, reward: 1 },
      judge_base_url: `${server.url}/v1`,
      judge_model: "qwen2_5_vl_tiny",
      judge_api_key_env: "VAGEN_TEST_JUDGE_KEY",
      judge: { max_tokens: 8, max_retries: 0, timeout_s: 120 },
    });
    const scorer = StateRewardScorer.create(cfg, SPEC, { VAGEN_TEST_JUDGE_KEY: "judge-key-for-test" });
    const state = gridState([2, 2], [["box", [3, 2]], ["target", [4, 2]]]);
    const turns = ["The box is below and same column of the player", "The target is above and left of the player"].map((text) => ({
      response: wm(text, text),
      stateBefore: state,
      stateAfter: state,
    }));
    const results = await scorer.scoreTurns(turns);
    const statuses = results.flatMap((r) => r.sections.map((s) => s.status));
    // Greedy nonsense from random weights: no JSON array to read.
    expect(statuses).toEqual(["unparseable", "unparseable", "unparseable", "unparseable"]);
    expect(results.every((r) => r.total === 0)).toBe(true);
    expect(scorer.takeStats()).toEqual({ requests: 4, failures: 0, unparseable: 4 });
    expect(server.logs.filter((line) => line.includes("/v1/chat/completions")).length).toBe(4);
    expect(server.logs.join("\n")).not.toContain("judge-key-for-test");
  }, 120_000);
});
