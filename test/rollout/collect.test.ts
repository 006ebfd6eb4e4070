/**
 * collectRollouts over scripted episodes: groups of n share a uid and differ by
 * trajIndex, every episode runs and its env is closed, a dropped episode is counted
 * without failing the batch, deterministic ids under a rollout seed, and a batch with
 * no row at all fails with the reasons.
 */
import { describe, expect, test } from "bun:test";
import { concatHarness } from "../../src/harness/concat.ts";
import type { ConversationRecord } from "../../src/models/conversation.ts";
import { collectRollouts, type RolloutItem } from "../../src/rollout/collect.ts";
import { IM_END, PAD, ScriptedClient, ScriptedEnv, t, text, tokenizer } from "./scripted.ts";

/** Items whose first observation says "poison" get a vision id back (unusable); others "Up". */
function replyFor(record: ConversationRecord) {
  const seen = tokenizer.decode(record.tokenIds);
  return { tokenIds: seen.includes("poison") ? [PAD, IM_END] : [...t("Up"), IM_END] };
}

function envFor(envs: ScriptedEnv[]) {
  return async (item: RolloutItem) => {
    const env = new ScriptedEnv(text(item.env === "poison" ? "poison" : `Start ${item.seed}`), [{ obs: text("end"), reward: item.seed, done: true }]);
    envs.push(env);
    return env;
  };
}

describe("collectRollouts", () => {
  test("n rollouts per item share the item's uid; all run concurrently; a dropped episode is counted, not fatal", async () => {
    const envs: ScriptedEnv[] = [];
    const items: RolloutItem[] = [
      { env: "scripted", seed: 3, uid: "item-a" },
      { env: "poison", seed: 4, uid: "item-b" },
      { env: "scripted", seed: 5 },
    ];
    const batch = await collectRollouts({ client: new ScriptedClient(replyFor), items, n: 2, harness: concatHarness(), sampling: {}, maxTurns: 2, createEnv: envFor(envs) });
    expect(batch.episodes).toHaveLength(6);
    expect(envs.every((e) => e.closed)).toBe(true);
    expect(batch.episodes.map((e) => [e.uid, e.trajIndex])).toEqual([
      ["item-a", 0],
      ["item-a", 1],
      ["item-b", 0],
      ["item-b", 1],
      ["2:scripted:5", 0],
      ["2:scripted:5", 1],
    ]);
    expect(batch.rows.map((r) => [r.uid, r.trajIndex, r.seed, r.tokenRewards.reduce((a, b) => a + b, 0)])).toEqual([
      ["item-a", 0, 3, 3],
      ["item-a", 1, 3, 3],
      ["2:scripted:5", 0, 5, 5],
      ["2:scripted:5", 1, 5, 5],
    ]);
    expect(new Set(batch.rows.map((r) => r.episodeId)).size).toBe(4);
    expect(batch.metrics).toMatchObject({ episodes: 6, rows: 4, dropped: { sampled_vision_token: 2 }, finishReasons: { done: 4, unusable: 2 }, truncatedRows: 0, meanEpisodeReward: 4, successRate: 0 });
  });

  test("a rollout seed gives each episode a derived id and its own sampling seed", async () => {
    const seen: number[] = [];
    const client = new ScriptedClient(replyFor);
    const reply = client.openConversation.bind(client);
    client.openConversation = () => {
      const conversation = reply();
      const original = conversation.reply.bind(conversation);
      conversation.reply = (sampling, options) => {
        seen.push(sampling.seed!);
        return original(sampling, options);
      };
      return conversation;
    };
    const run = () => collectRollouts({ client, items: [{ env: "scripted", seed: 3 }], n: 2, harness: concatHarness(), sampling: { temperature: 1 }, maxTurns: 1, seed: 11, createEnv: envFor([]) });
    const first = await run();
    const second = await run();
    expect(first.rows.map((r) => r.episodeId)).toEqual(second.rows.map((r) => r.episodeId));
    expect(first.rows[0]!.episodeId).toMatch(/^vagen-[0-9a-f]{32}$/);
    expect(first.rows[0]!.episodeId).not.toBe(first.rows[1]!.episodeId);
    expect(seen.slice(0, 2)).toEqual(seen.slice(2, 4));
    expect(seen[0]).not.toBe(seen[1]);
  });

  test("scoreTurns sees every episode of the batch at once; its scores land on the rows", async () => {
    let seen = 0;
    const batch = await collectRollouts({
      client: new ScriptedClient(replyFor),
      items: [{ env: "scripted", seed: 2 }],
      n: 2,
      harness: concatHarness(),
      sampling: {},
      maxTurns: 1,
      createEnv: envFor([]),
      scoreTurns: async (episodes) => {
        seen = episodes.length;
        return episodes.map((e) => e.turns.map(() => ({ tokenRewards: [0.5, 0, 0], parts: { judge: 0.5 } })));
      },
    });
    expect(seen).toBe(2);
    expect(batch.rows.map((r) => r.tokenRewards.slice(0, 3))).toEqual([
      [0.5, 0, 2],
      [0.5, 0, 2],
    ]);
    expect(batch.rows[0]!.rewardParts).toEqual({ env: 2, judge: 0.5 });
  });

  test("a batch in which every episode is dropped fails with the reasons", async () => {
    const run = collectRollouts({ client: new ScriptedClient(replyFor), items: [{ env: "poison", seed: 1 }], n: 2, harness: concatHarness(), sampling: {}, maxTurns: 1, createEnv: envFor([]) });
    await expect(run).rejects.toThrow("all 2 episode(s) were dropped (sampled_vision_token: 2)");
    // Unless the caller checks the union of several calls itself.
    const part = await collectRollouts({ client: new ScriptedClient(replyFor), items: [{ env: "poison", seed: 1 }], n: 1, harness: concatHarness(), sampling: {}, maxTurns: 1, createEnv: envFor([]), requireRows: false });
    expect([part.rows.length, part.metrics.dropped]).toEqual([0, { sampled_vision_token: 1 }]);
  });
});
