import { describe, expect, test } from "bun:test";
import { SokobanEnv, SOKOBAN_STATE_REWARD_SPEC as SPEC } from "../../envs/sokoban/index.ts";
import { playerIndex, roomFromText } from "../../envs/sokoban/room.ts";
import type { EpisodeRecord, TurnRecord } from "../../src/harness/types.ts";
import type { CollectOptions } from "../../src/rollout/collect.ts";
import { tokenEndsFromPieces } from "../../src/rewards/credit.ts";
import { applyStateRewards, meanEpisodeMetrics, stateRewardHook } from "../../src/rewards/episodes.ts";
import { StateRewardScorer } from "../../src/rewards/state-reward.ts";
import { config, EXACT_BOTH } from "./helpers.ts";

/** A toy tokenizer: tags, words and runs of spaces are tokens; the id is the piece's index in a shared vocabulary. */
const vocab: string[] = [];
function tokenize(text: string): number[] {
  return (text.match(/<[^>]+>|[^<\s]+|\s+/g) ?? []).map((piece) => {
    let id = vocab.indexOf(piece);
    if (id < 0) id = vocab.push(piece) - 1;
    return id;
  });
}
const tokenEndsOf = (ids: readonly number[]) => tokenEndsFromPieces(ids.map((id) => vocab[id]!));

/** Plays scripted responses on a fixed room and records the episode as a harness would. */
async function play(responses: string[]): Promise<EpisodeRecord> {
  const env = new SokobanEnv({ prompt_format: "wm" });
  const reset = await env.reset(0);
  const room = env.currentRoom!;
  // Player (1,2), box (2,2), target (3,2).
  Object.assign(room, roomFromText("######\n#_P__#\n#_X__#\n#_O__#\n#____#\n######"));
  (env as unknown as { player: number }).player = playerIndex(room);
  const resetInfo = { ...reset.info, state: (env as unknown as { groundTruth(): unknown }).groundTruth() };
  const turns: TurnRecord[] = [];
  for (const [i, text] of responses.entries()) {
    const step = await env.step(text);
    turns.push({
      index: i + 1,
      prompt: [],
      completion: { text, finishReason: "stop", usage: { promptTokens: 0, completionTokens: 0 }, tokenIds: tokenize(text) },
      reward: step.reward,
      done: step.done,
      info: step.info,
      observation: step.obs,
    });
  }
  return { harness: "concat", rowPerTurn: false, seed: 0, systemPrompt: { text: "", images: [] }, initialObservation: reset.obs, resetInfo, turns, finishReason: "max_turns", totalReward: 0 };
}

const turn1 =
  "<perception>The box is below and same column of the player, and the target is below and same column of the player</perception>" +
  "<reasoning>push down</reasoning>" +
  "<prediction>The box will be below and same column of the player, and the target will be below and same column of the player</prediction>" +
  "<answer>Down</answer>";
// After the push the box sits on the target right below the player and the room is
// solved, so later steps move nothing; this turn's perception is right, its prediction
// (above) is wrong on the vertical axis only.
const turn2 =
  "<perception>The box is below and same column of the player, and the target is below and same column of the player</perception>" +
  "<reasoning>step aside</reasoning>" +
  "<prediction>The box will be above and same column of the player, and the target will be above and same column of the player</prediction>" +
  "<answer>Left</answer>";

describe("applyStateRewards over episode records", () => {
  test("states chain from the reset info; scores sit on each section's last token; parts and metrics per episode", async () => {
    const episode = await play([turn1, turn2, "<answer>Up</answer>"]);
    const scorer = new StateRewardScorer(config({ ...EXACT_BOTH, score_base: 0 }), SPEC, null);
    const { turnScores, metrics } = await applyStateRewards([episode], scorer, tokenEndsOf);
    const [first, second, third] = turnScores[0]!;

    // Turn 1: both perfect.
    const ids1 = episode.turns[0]!.completion.tokenIds!;
    const perceptionEnd = ids1.indexOf(vocab.indexOf("</perception>")) - 1; // the word "player" before the closing tag
    const predictionEnd = ids1.indexOf(vocab.indexOf("</prediction>")) - 1;
    expect(first!.tokenRewards.length).toBe(ids1.length);
    expect(first!.tokenRewards[perceptionEnd]).toBe(1);
    expect(first!.tokenRewards[predictionEnd]).toBe(1);
    expect(first!.tokenRewards.reduce((a, b) => a + b, 0)).toBe(2);
    expect(first!.parts).toEqual({ state_estimation: 1, transition_prediction: 1 });

    // Turn 2: the room is solved, so "Left" moves nothing: box and target stay below and
    // in the same column. The perception is right (1); the prediction "above, same
    // column" gets one axis of two for each object: F1 0.5.
    expect(second!.parts).toEqual({ state_estimation: 1, transition_prediction: 0.5 });
    // Turn 3 is not in the format: nothing.
    expect(third!.parts).toEqual({ state_estimation: 0, transition_prediction: 0 });
    expect(third!.tokenRewards.every((r) => r === 0)).toBe(true);

    expect(metrics[0]).toEqual({ state_estimation_reward: 2, transition_prediction_reward: 1.5, format_correct_rate: 2 / 3 });
    // The records are left as they were: the env's own rewards stay where the env put them.
    expect(episode.turns[0]!.info.token_rewards).toBeUndefined();
  });

  test("episode_mean pays each turn its share; one batch across episodes; no ids, no placement", async () => {
    const a = await play([turn1, turn1]);
    const b = await play([turn1]);
    b.turns[0]!.completion.tokenIds = undefined;
    const scorer = new StateRewardScorer(config({ ...EXACT_BOTH, score_base: 0, aggregation: "episode_mean" }), SPEC, null);
    const { turnScores, metrics } = await applyStateRewards([a, b], scorer, tokenEndsOf);
    // Episode a: both turns perfect (the second repeats the first's text, which still
    // holds after the push); each pays half of its 1 per section.
    expect(turnScores[0]!.map((t) => t!.parts.state_estimation)).toEqual([0.5, 0.5]);
    expect(turnScores[1]![0]).toBeUndefined();
    expect(metrics[1]!.state_estimation_reward).toBe(1);
    expect(meanEpisodeMetrics(metrics).state_estimation_reward).toBe(1);
  });
});

describe("the collectRollouts hook", () => {
  test("returns the per-turn scores and reports the step's metrics once", async () => {
    const episode = await play([turn1, "<answer>Up</answer>"]);
    const scorer = new StateRewardScorer(config({ ...EXACT_BOTH, score_base: 0 }), SPEC, null);
    const reported: Record<string, number>[] = [];
    // Typed as collectRollouts' option, so the two seams cannot drift apart.
    const hook: CollectOptions["scoreTurns"] = stateRewardHook(scorer, tokenEndsOf, (m) => reported.push(m));
    const scores = await hook!([episode]);
    expect(scores[0]!.map((t) => t!.parts)).toEqual([
      { state_estimation: 1, transition_prediction: 1 },
      { state_estimation: 0, transition_prediction: 0 },
    ]);
    expect(reported).toEqual([
      {
        state_estimation_reward: 1,
        transition_prediction_reward: 1,
        format_correct_rate: 0.5,
        "state_reward/judge_requests": 0,
        "state_reward/judge_failures": 0,
        "state_reward/judge_unparseable": 0,
      },
    ]);
  });
});
