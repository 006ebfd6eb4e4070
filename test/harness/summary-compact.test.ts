/**
 * summary_compact (VAGEN main's compact) on a scripted four-turn episode (no model): the
 * conversation is summarised in place once its tokens plus the last turn's cost reach
 * compact_budget, the summary is a sampled (trained) span of that row, and the next
 * conversation opens with the summary and the pending observation. Ids written out by
 * piece; counts in the comments.
 */
import { describe, expect, test } from "bun:test";
import { createHarness } from "../../src/harness/registry.ts";
import { SUMMARY_REQUEST, summaryCompactHarness } from "../../src/harness/summary-compact.ts";
import { rowsFromEpisode } from "../../src/rollout/rows.ts";
import { IM_END, IM_START, NL, ScriptedClient, ScriptedEnv, t, text } from "../rollout/scripted.ts";

const SYSTEM = [IM_START, ...t("system\nYou are a tiny agent."), IM_END, NL]; // 21
const user = (s: string) => [IM_START, ...t(`user\n${s}`), IM_END, NL];
const HEADER = [IM_START, ...t("assistant\n")]; // 8
const UP = [...t("Up"), IM_END]; // 3
const SUMMARY = [...t("Went up twice"), IM_END];
const ones = (n: number) => new Array<number>(n).fill(1);
const zeros = (n: number) => new Array<number>(n).fill(0);

const fourTurns = () =>
  new ScriptedEnv(text("Start"), [
    { obs: text("Obs 1"), reward: 0.1, done: false },
    { obs: text("Obs 2"), reward: 0.2, done: false },
    { obs: text("Obs 3"), reward: 0.3, done: false },
    { obs: text("Obs 4"), reward: 1, done: true },
  ]);

/** Replies "Up", except to a summary request. */
function replies(record: { tokenIds: number[] }) {
  const asked = t(SUMMARY_REQUEST);
  const tail = record.tokenIds.slice(-(asked.length + 2 + 8));
  return { tokenIds: tail.join(",").includes(asked.join(",")) ? SUMMARY : UP };
}

describe("summary_compact", () => {
  test("summarises in place at compact_budget; the summary is trained; the next conversation opens with it and the pending observation", async () => {
    // Turn 1 (opening): 21 + 11 + 8 = 40 tokens, then "Up" + NL: 44. Turn 2 adds "Obs 1" (12),
    // a header (8) and "Up" + NL (4): 68, a turn cost of 24. Before turn 3, 68 + 24 = 92 >= 90.
    const client = new ScriptedClient(replies);
    const episode = await summaryCompactHarness({ compact_budget: 90 }).runEpisode({ env: fourTurns(), client, seed: 0, maxTurns: 5, sampling: {} });
    expect(episode.finishReason).toBe("done");
    expect(episode.turns).toHaveLength(4);
    expect(episode.summaries).toEqual([{ text: "Went up twice", afterTurns: 2, conversation: 0 }]);
    // The summary's budget: max(1, min(per-turn limit (none), floor(90 / 4) = 22)).
    expect(client.calls.map((c) => [c.conversation, c.maxTokens])).toEqual([
      ["scripted-0", undefined],
      ["scripted-0", undefined],
      ["scripted-0", 22],
      ["scripted-1", undefined],
      ["scripted-1", undefined],
    ]);
    expect(episode.conversations!.map((c) => c.endsWithSummary)).toEqual([true, false]);

    const { rows } = rowsFromEpisode(episode, { uid: "g", episodeId: "e", trajIndex: 0, env: "scripted", seed: 0 });
    expect(rows).toHaveLength(2);
    const [first, second] = rows as [(typeof rows)[0], (typeof rows)[0]];
    const request = user(SUMMARY_REQUEST);
    expect(first.promptIds).toEqual([...SYSTEM, ...user("Start"), ...HEADER]);
    expect(first.responseIds).toEqual([...UP, NL, ...user("Obs 1"), ...HEADER, ...UP, NL, ...request, ...HEADER, ...SUMMARY, NL]);
    const between = 1 + 12 + 8; // NL, "Obs 1", header
    const beforeSummary = 1 + request.length + 8; // NL, the request, header
    expect(first.responseMask).toEqual([...ones(3), ...zeros(between), ...ones(3), ...zeros(beforeSummary), ...ones(SUMMARY.length), 0]);
    // Rewards at the two turns' ends; the summary earns nothing itself.
    const rewards = zeros(first.responseIds.length);
    rewards[2] = 0.1;
    rewards[3 + between + 2] = 0.2;
    expect(first.tokenRewards).toEqual(rewards);
    expect(first.responseSpans.map((s) => s.end - s.start)).toEqual([3, 3, SUMMARY.length]);
    expect([first.endsWithSummary, first.lastTurn, first.turnIndex]).toEqual([true, false, 0]);
    expect(first.stateKeys).toHaveLength(3);
    expect(first.stateKeys![2]).toBe("summary");

    // The reopening: the summary, then the pending observation "Obs 2", in one user message.
    expect(second.promptIds).toEqual([...SYSTEM, IM_START, ...t("user\nSummary so far: Went up twice\n\nObs 2"), IM_END, NL, ...HEADER]);
    expect(second.responseIds).toEqual([...UP, NL, ...user("Obs 3"), ...HEADER, ...UP, NL]);
    expect(second.tokenRewards.filter((r) => r !== 0)).toEqual([0.3, 1]);
    expect([second.endsWithSummary, second.lastTurn, second.turnIndex]).toEqual([false, true, 1]);
  });

  test("two conversations in a row summarised after one turn make the episode unusable", async () => {
    // A budget of 10 is reached after every single turn.
    const client = new ScriptedClient(replies);
    const episode = await summaryCompactHarness({ compact_budget: 10 }).runEpisode({ env: fourTurns(), client, seed: 0, maxTurns: 5, sampling: {} });
    expect(episode.finishReason).toBe("unusable");
    expect(episode.unusable).toBe("compaction_no_progress");
    expect(episode.summaries).toHaveLength(1);
    expect(rowsFromEpisode(episode, { uid: "g", episodeId: "e", trajIndex: 0, env: "scripted", seed: 0 }).dropped).toBe("compaction_no_progress");
  });

  test("the row's response budget triggers it too, keeping room for the summary", async () => {
    // R = 140, per-turn 12: summary budget min(12, floor(140 / 4) = 35) = 12; the request is
    // 60 tokens and its generation prompt 8, so 80 are reserved; the floor is min(12, 35) = 12.
    // Pending: an observation (12) and its generation prompt (8). Before turn 2: 140 - 4 spent
    // - 20 - 80 = 36 left; before turn 3: 140 - 28 - 20 - 80 = 12, just the floor;
    // before turn 4: 140 - 52 - 20 - 80 < 0: summarise after three turns.
    const client = new ScriptedClient(replies);
    expect(user(SUMMARY_REQUEST).length).toBe(60);
    const episode = await summaryCompactHarness().runEpisode({ env: fourTurns(), client, seed: 0, maxTurns: 5, sampling: { maxTokens: 12 }, limits: { maxResponseLength: 140 } });
    expect(episode.summaries?.map((s) => s.afterTurns)).toEqual([3]);
    expect(client.calls.map((c) => c.maxTokens)).toEqual([12, 12, 12, 12, 12]);
    const rows = rowsFromEpisode(episode, { uid: "g", episodeId: "e", trajIndex: 0, env: "scripted", seed: 0 }, { maxResponseLength: 140 }).rows;
    // 52 + the request and header (68) + the summary (11) + NL = 132: inside the budget, as reserved.
    expect(rows.map((r) => [r.responseIds.length, r.truncation, r.endsWithSummary])).toEqual([
      [132, "none", true],
      [4, "none", false],
    ]);
  });

  test("registered by name; options checked", async () => {
    expect((await createHarness("summary_compact", { compact_budget: 512 })).name).toBe("summary_compact");
    await expect(createHarness("summary_compact", { compact_budjet: 512 })).rejects.toThrow('unknown key "compact_budjet"');
  });
});
