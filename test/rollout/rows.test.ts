/**
 * Episodes to training rows, on a scripted two-turn episode over the tiny Qwen2.5-VL
 * fixture's tokenizer and chat template (no model: the client "samples" scripted ids).
 * Every id, mask, log-prob, turn boundary and reward position is written out by hand.
 *
 * The script: system "You are a tiny agent.", first observation "Start"; the model
 * answers "Left" spelled one letter per token (ids a re-encoding would merge) and the
 * end-of-turn id, gets reward 0.5 and "Obs 1"; then answers "Up" + end-of-turn, gets
 * reward 1 and done.
 */
import { describe, expect, test } from "bun:test";
import { concatHarness } from "../../src/harness/concat.ts";
import { noConcatHarness } from "../../src/harness/no-concat.ts";
import type { EpisodeRecord, Harness, RowLimits } from "../../src/harness/types.ts";
import { rowsFromEpisode, responseCut } from "../../src/rollout/rows.ts";
import { IM_END, IM_START, NL, PAD, ScriptedClient, ScriptedEnv, codec, t, text } from "./scripted.ts";

const LEFT_BY_LETTER = [43, 68, 69, 83]; // "L" "e" "f" "t"; the tokenizer itself writes "Left" as [43, 333]
const UP = [52, 79];

const zeros = (n: number) => new Array<number>(n).fill(0);
const ones = (n: number) => new Array<number>(n).fill(1);

const SYSTEM = [IM_START, ...t("system\nYou are a tiny agent."), IM_END, NL]; // 1 + 18 + 1 + 1 = 21
const USER_START = [IM_START, ...t("user\nStart"), IM_END, NL]; // 1 + 8 + 2 = 11
const USER_OBS1 = [IM_START, ...t("user\nObs 1"), IM_END, NL]; // 1 + 9 + 2 = 12
const HEADER = [IM_START, ...t("assistant\n")]; // 1 + 7 = 8
const REPLY_1 = [...LEFT_BY_LETTER, IM_END]; // sampled, end-of-turn included: 5
const REPLY_2 = [...UP, IM_END]; // 3

async function play(harness: Harness, limits?: RowLimits, replies = [REPLY_1, REPLY_2]): Promise<{ episode: EpisodeRecord; client: ScriptedClient; env: ScriptedEnv }> {
  const client = new ScriptedClient(replies.map((tokenIds) => ({ tokenIds })));
  const env = new ScriptedEnv(text("Start"), [
    { obs: text("Obs 1"), reward: 0.5, done: false },
    { obs: text("Obs 2"), reward: 1, done: true },
  ]);
  const episode = await harness.runEpisode({ env, client, seed: 7, maxTurns: 3, sampling: {}, limits });
  return { episode, client, env };
}

const IDENTITY = { uid: "g0", episodeId: "e0", trajIndex: 0, env: "scripted", seed: 7 };

describe("rowsFromEpisode", () => {
  test("the pieces are what the comments say", () => {
    expect([SYSTEM.length, USER_START.length, USER_OBS1.length, HEADER.length]).toEqual([21, 11, 12, 8]);
    expect(t("Left")).toEqual([43, 333]);
    expect(codec.decode(LEFT_BY_LETTER)).toBe("Left");
  });

  test("concat: one row; its model tokens are the sampled ids (not the re-encoded text), with their log-probs and rewards at turn ends", async () => {
    const { episode, client, env } = await play(concatHarness());
    expect(env.responses).toEqual(["Left", "Up"]);
    expect(episode.finishReason).toBe("done");
    expect(client.released).toEqual(["scripted-0"]); // one conversation, released at the end
    const { rows, dropped } = rowsFromEpisode(episode, IDENTITY);
    expect(dropped).toBeUndefined();
    expect(rows).toHaveLength(1);
    const row = rows[0]!;
    // Prompt: system [0, 21), "Start" [21, 32), the generation prompt [32, 40).
    expect(row.promptIds).toEqual([...SYSTEM, ...USER_START, ...HEADER]);
    // Response (30 tokens): reply 1 [0, 5), NL [5, 6), "Obs 1" [6, 18), header [18, 26), reply 2 [26, 29), NL [29, 30).
    expect(row.responseIds).toEqual([...REPLY_1, NL, ...USER_OBS1, ...HEADER, ...REPLY_2, NL]);
    expect(row.responseIds.slice(0, 4)).toEqual([43, 68, 69, 83]);
    expect(row.responseMask).toEqual([...ones(5), ...zeros(21), ...ones(3), 0]);
    expect(row.rolloutLogprobs).toEqual([-0.1, -0.2, -0.3, -0.4, -0.5, ...zeros(21), -0.1, -0.2, -0.3, 0]);
    expect(row.logprobsComplete).toBe(true);
    // Turn rewards on each reply's last sampled token: the end-of-turn ids at 4 and 28.
    const rewards = zeros(30);
    rewards[4] = 0.5;
    rewards[28] = 1;
    expect(row.tokenRewards).toEqual(rewards);
    expect(row.responseSpans).toEqual([
      { start: 0, end: 5 },
      { start: 26, end: 29 },
    ]);
    expect(row).toMatchObject({ ...IDENTITY, turnIndex: 0, lastTurn: true, episodeTurns: 2, episodeReward: 1.5, truncation: "none", endsWithSummary: false, images: [] });
  });

  test("no_concat: one row per model call with its own prompt; turn indices 0 and 1; the last row marked", async () => {
    const { episode, client } = await play(noConcatHarness());
    expect(client.released).toEqual(["scripted-0", "scripted-1"]);
    const { rows } = rowsFromEpisode(episode, IDENTITY);
    expect(rows).toHaveLength(2);
    const [first, second] = rows as [(typeof rows)[0], (typeof rows)[0]];
    expect(first.promptIds).toEqual([...SYSTEM, ...USER_START, ...HEADER]);
    expect(first.responseIds).toEqual([...REPLY_1, NL]);
    expect(first.responseMask).toEqual([1, 1, 1, 1, 1, 0]);
    expect(first.tokenRewards).toEqual([0, 0, 0, 0, 0.5, 0]);
    expect(first.responseSpans).toEqual([{ start: 0, end: 5 }]);
    // The second call sees the system prompt and "Obs 1" only.
    expect(second.promptIds).toEqual([...SYSTEM, ...USER_OBS1, ...HEADER]);
    expect(second.responseIds).toEqual([...REPLY_2, NL]);
    expect(second.responseMask).toEqual([1, 1, 1, 0]);
    expect(second.rolloutLogprobs).toEqual([-0.1, -0.2, -0.3, 0]);
    expect(second.tokenRewards).toEqual([0, 0, 1, 0]);
    expect([first.turnIndex, second.turnIndex]).toEqual([0, 1]);
    expect([first.lastTurn, second.lastTurn]).toEqual([false, true]);
    expect([first.episodeId, second.episodeId]).toEqual(["e0", "e0"]);
    expect([first.episodeReward, second.episodeReward]).toEqual([1.5, 1.5]);
  });

  test("anchor-state keys: one per trained span, the same for the same observation, the env's state_key when given", async () => {
    const concat = rowsFromEpisode((await play(concatHarness())).episode, IDENTITY).rows;
    const split = rowsFromEpisode((await play(noConcatHarness())).episode, IDENTITY).rows;
    const [start, obs1] = concat[0]!.stateKeys!;
    expect(concat[0]!.stateKeys).toHaveLength(2);
    expect(start).toMatch(/^obs:[0-9a-f]{32}$/);
    expect(start).not.toBe(obs1);
    expect(split.map((r) => r.stateKeys)).toEqual([[start], [obs1]]);

    const client = new ScriptedClient([{ tokenIds: REPLY_2 }, { tokenIds: REPLY_2 }]);
    const env = new ScriptedEnv(text("Start"), [
      { obs: text("Obs 1"), reward: 0, done: false, info: { state_key: "player@(1,2)" } },
      { obs: text("Obs 2"), reward: 1, done: true },
    ]);
    const keyed = await concatHarness().runEpisode({ env, client, seed: 1, maxTurns: 2, sampling: {} });
    expect(rowsFromEpisode(keyed, IDENTITY).rows[0]!.stateKeys).toEqual([start, "player@(1,2)"]);
  });

  test("per-token rewards from the env land on the reply's tokens", async () => {
    const client = new ScriptedClient([{ tokenIds: REPLY_2 }]);
    const env = new ScriptedEnv(text("Start"), [{ obs: text("Obs 1"), reward: 1, done: true, info: { token_rewards: [0.25, 0.25, 0.5] } }]);
    const episode = await concatHarness().runEpisode({ env, client, seed: 1, maxTurns: 1, sampling: {} });
    expect(rowsFromEpisode(episode, IDENTITY).rows[0]!.tokenRewards).toEqual([0.25, 0.25, 0.5, 0]);
  });

  test("scores from outside the env (world-model rewards) are added on the reply's tokens, with their parts", async () => {
    const { episode } = await play(concatHarness());
    const scores = [{ tokenRewards: [0, 0.1, 0, 0.2, 0], parts: { state_estimation: 0.3 } }, undefined];
    const row = rowsFromEpisode(episode, IDENTITY, {}, scores).rows[0]!;
    const rewards = zeros(30);
    rewards[1] = 0.1;
    rewards[3] = 0.2;
    rewards[4] = 0.5;
    rewards[28] = 1;
    expect(row.tokenRewards).toEqual(rewards);
    expect(row.rewardParts).toEqual({ env: 1.5, state_estimation: 0.3 });
    expect(() => rowsFromEpisode(episode, IDENTITY, {}, [{ tokenRewards: [1] }])).toThrow("turn 1's scores has 1 value(s) but the reply has 5 sampled token(s)");
  });

  test("a response over max_response_length keeps its head; the reply the cut runs through is dropped whole", async () => {
    // Played without a budget; the row is cut at 28, inside turn 2's reply [26, 29).
    const { episode, client } = await play(concatHarness());
    expect(client.calls.map((c) => c.maxTokens)).toEqual([undefined, undefined]);
    const row = rowsFromEpisode(episode, IDENTITY, { maxResponseLength: 28 }).rows[0]!;
    expect(row.responseIds).toEqual([...REPLY_1, NL, ...USER_OBS1, ...HEADER, ...UP]); // 28 tokens: the cut is after "Up"
    expect(row.responseMask).toEqual([...ones(5), ...zeros(23)]); // "Up" is kept as context, not trained
    expect(row.rolloutLogprobs).toEqual([-0.1, -0.2, -0.3, -0.4, -0.5, ...zeros(23)]);
    const rewards = zeros(28);
    rewards[4] = 0.5; // turn 2's reward went with its reply
    expect(row.tokenRewards).toEqual(rewards);
    expect(row.responseSpans).toEqual([{ start: 0, end: 5 }]);
    expect(row.stateKeys).toHaveLength(1);
    expect(row.truncation).toBe("response_length");
  });

  test("with a budget, the harness leaves each generation the room the row has left", async () => {
    // Budget 40: turn 1 may take all 40; before turn 2, 18 tokens are spent (reply 1, NL,
    // "Obs 1") and its generation prompt takes 8 more: 40 - 26 = 14 left.
    const { episode, client } = await play(concatHarness(), { maxResponseLength: 40 });
    expect(client.calls.map((c) => c.maxTokens)).toEqual([40, 14]);
    const row = rowsFromEpisode(episode, IDENTITY, { maxResponseLength: 40 }).rows[0]!;
    expect([row.responseIds.length, row.truncation]).toEqual([30, "none"]);
  });

  test("no room for another generation ends the episode with no_room; the rows keep what was played", async () => {
    // Budget 20: after turn 1 and "Obs 1", 18 tokens are spent, and turn 2's generation prompt needs 8.
    const { episode } = await play(concatHarness(), { maxResponseLength: 20 });
    expect(episode.finishReason).toBe("no_room");
    expect(episode.turns).toHaveLength(1);
    const row = rowsFromEpisode(episode, IDENTITY, { maxResponseLength: 20 }).rows[0]!;
    expect(row.responseIds).toEqual([...REPLY_1, NL, ...USER_OBS1]);
    expect(row.responseMask).toEqual([...ones(5), ...zeros(13)]);
    expect(row.truncation).toBe("none");
  });

  test("unusable episodes are dropped with their reason: a sampled vision id, an opening prompt over budget", async () => {
    const vision = await play(concatHarness(), undefined, [[...t("Le"), PAD, IM_END]]);
    expect(vision.episode.finishReason).toBe("unusable");
    expect(rowsFromEpisode(vision.episode, IDENTITY)).toEqual({ rows: [], dropped: "sampled_vision_token" });

    // The opening prompt is 32 tokens before the generation prompt.
    const long = await play(concatHarness(), { maxPromptLength: 31 });
    expect(long.episode.unusable).toBe("context_too_large");
    expect(long.client.calls).toEqual([]); // nothing was generated
    expect(rowsFromEpisode(long.episode, IDENTITY)).toEqual({ rows: [], dropped: "context_too_large" });

    // 32 tokens fit the harness's check, but with the generation prompt the row's prompt is 40.
    const header = await play(concatHarness(), { maxPromptLength: 32 });
    expect(rowsFromEpisode(header.episode, IDENTITY, { maxPromptLength: 32 }).dropped).toBe("context_too_large");
  });

  test("the response cut never splits an image block", () => {
    // Prompt of 10; an image's 4 placeholders at response positions [6, 10).
    const images = [{ offset: 16, length: 4 }];
    expect(responseCut(12, 8, images, 10)).toBe(6);
    expect(responseCut(12, 10, images, 10)).toBe(10);
    expect(responseCut(12, 12, images, 10)).toBe(12);
    expect(responseCut(12, undefined, images, 10)).toBe(12);
  });
});
