import { afterEach, describe, expect, test } from "bun:test";
import { SOKOBAN_STATE_REWARD_SPEC as SPEC } from "../../envs/sokoban/index.ts";
import { parseRelationsReply } from "../../src/rewards/judge.ts";
import { judgeMetrics, StateRewardScorer } from "../../src/rewards/state-reward.ts";
import { startFakeJudge, type FakeJudge, type JudgeBehaviour } from "./fake-judge.ts";
import { config, gridState, wm } from "./helpers.ts";

const before = gridState([2, 2], [["box", [3, 2]], ["target", [4, 2]]]);
const after = gridState([3, 2], [["box", [4, 2]], ["target", [4, 2]]]);
const RIGHT = `[{"object_id": "box", "vertical_relation": "below", "horizontal_relation": "same"}, {"object_id": "target", "vertical_relation": "below", "horizontal_relation": "same"}]`;
const WRONG = `[{"object_id": "box", "vertical_relation": "above", "horizontal_relation": "left"}, {"object_id": "target", "vertical_relation": "above", "horizontal_relation": "left"}]`;

let judge: FakeJudge | undefined;
afterEach(() => judge?.stop());

function scorerFor(behaviour: (text: string) => JudgeBehaviour, extra: Record<string, unknown> = {}, env: Record<string, string> = {}): StateRewardScorer {
  judge = startFakeJudge(behaviour);
  const cfg = config({
    state_estimation: { enable: true, reward: 1 },
    judge_base_url: judge.baseUrl,
    judge_model: "fake-judge",
    judge: { timeout_s: 0.3, max_retries: 2, min_backoff_s: 0.01, max_backoff_s: 0.02 },
    ...extra,
  });
  return StateRewardScorer.create(cfg, SPEC, env);
}

const turn = (perception: string) => ({ response: wm(perception, "p"), stateBefore: before, stateAfter: after });

describe("judge path against a fake judge server", () => {
  test("right, wrong, malformed, slow and failing judgements in one batch", async () => {
    const scorer = scorerFor((text) => {
      if (text.startsWith("right")) return { kind: "answer", reply: `Here is the JSON:\n\`\`\`json\n${RIGHT}\n\`\`\`` };
      if (text.startsWith("wrong")) return { kind: "answer", reply: WRONG };
      if (text.startsWith("malformed")) return { kind: "answer", reply: "I think the box is below the player." };
      if (text.startsWith("slow")) return { kind: "slow", delayMs: 2000, reply: RIGHT };
      if (text.startsWith("flaky")) return { kind: "status", status: 429, times: 1, then: RIGHT };
      return { kind: "status", status: 500 };
    });
    const results = await scorer.scoreTurns(["right", "wrong", "malformed", "slow", "flaky", "failing"].map((t) => turn(`${t}: a description`)));
    const summary = results.map((r) => [r.sections[0]!.status, r.sections[0]!.score]);
    expect(summary).toEqual([
      ["scored", 1],
      ["scored", 0], // F1 0 -> below the floor
      ["unparseable", 0],
      ["judge_failed", 0], // every attempt timed out
      ["scored", 1], // a 429, then an answer on the retry
      ["judge_failed", 0], // 500 on every attempt
    ]);
    // The first attempt plus max_retries (2) for the ones that keep failing.
    expect(judge!.attempts.get("failing: a description")).toBe(3);
    expect(judge!.attempts.get("flaky: a description")).toBe(2);
    expect(judgeMetrics(scorer.takeStats())).toEqual({
      "state_reward/judge_requests": 6,
      "state_reward/judge_failures": 2,
      "state_reward/judge_unparseable": 1,
    });
    expect(scorer.takeStats()).toEqual({ requests: 0, failures: 0, unparseable: 0 });
  }, 20_000);

  test("gated turns never reach the judge", async () => {
    const scorer = scorerFor(() => ({ kind: "answer", reply: RIGHT }));
    const [result] = await scorer.scoreTurns([{ response: "<answer>Down</answer>", stateBefore: before, stateAfter: after }]);
    expect(result!.gate).toBe("format");
    expect(judge!.attempts.size).toBe(0);
  });

  test("YES/NO judging fills the env's template with the gold state", async () => {
    let seenState = "";
    judge = startFakeJudge(() => ({ kind: "answer", reply: "<think>ok</think><answer>YES</answer>" }));
    const cfg = config({ state_estimation: { enable: true, reward: 0.5 }, method: "yes_no", judge_base_url: judge.baseUrl, judge_model: "m" });
    const scorer = new StateRewardScorer(cfg, SPEC, {
      description: "spy",
      complete: async (prompts) => {
        seenState = prompts[0]!;
        return ["<answer>NO</answer>"];
      },
    });
    const [result] = await scorer.scoreTurns([turn("the box is below")]);
    expect(seenState).toContain('"vertical_relation":"below"');
    expect(seenState).toContain("The agent wrote:\nthe box is below");
    expect(result!.sections[0]).toMatchObject({ status: "scored", quality: 0, score: 0 });
    const yes = StateRewardScorer.create(cfg, SPEC, {});
    const [scored] = await yes.scoreTurns([turn("the box is below")]);
    expect(scored!.sections[0]!.score).toBe(0.5);
  });

  test("the API key comes from the named variable, goes only into the Authorization header", async () => {
    const scorer = scorerFor(() => ({ kind: "status", status: 401 }), { judge_api_key_env: "JUDGE_KEY_FOR_TEST" }, { JUDGE_KEY_FOR_TEST: "sk-judge-secret" });
    const [result] = await scorer.scoreTurns([turn("x")]);
    expect(judge!.authorizations[0]).toBe("Bearer sk-judge-secret");
    expect(JSON.stringify(result)).not.toContain("sk-judge-secret");
    expect(result!.sections[0]!.status).toBe("judge_failed");
    // A 401 is not retried.
    expect(judge!.attempts.get("x")).toBe(1);
    expect(() => StateRewardScorer.create(config({ state_estimation: { enable: true }, judge_base_url: judge!.baseUrl, judge_model: "m", judge_api_key_env: "UNSET_VAR_X" }), SPEC, {})).toThrow(
      /UNSET_VAR_X.*not set/,
    );
  });
});

describe("reading a judge's reply", () => {
  test("the first [ to the last ], object entries only, vocabulary enforced", () => {
    expect(parseRelationsReply(`Sure.\n[{"object_id": "Box1", "vertical_relation": "BELOW", "horizontal_relation": "diagonal"}, 3, "x"]\nDone.`)).toEqual([
      { object_id: "box", vertical_relation: "below", horizontal_relation: null },
    ]);
    expect(parseRelationsReply("[]")).toEqual([]);
    expect(parseRelationsReply("no array here")).toBeNull();
    expect(parseRelationsReply("[not json]")).toBeNull();
    expect(parseRelationsReply(`[{"vertical_relation": "above"}]`)).toEqual([]);
  });
});
