/**
 * The harness loop over token-level conversations (scripted client, no model): which
 * calls continue a conversation and which open one, the room left for each generation
 * (VAGEN main's generation_limit, by hand), the message path when asked for, and that
 * conversations are released however the episode ends.
 */
import { describe, expect, test } from "bun:test";
import { compactHarness } from "../../src/harness/compact.ts";
import { concatHarness } from "../../src/harness/concat.ts";
import { observationHistoryHarness } from "../../src/harness/observation-history.ts";
import { generationFloor, generationLimit } from "../../src/harness/generation-limit.ts";
import { defineHarness } from "../../src/harness/loop.ts";
import { callSeed } from "../../src/harness/token-conversations.ts";
import { IM_END, ScriptedClient, ScriptedEnv, t, text } from "../rollout/scripted.ts";

const up = () => ({ tokenIds: [...t("Up"), IM_END] });
const threeTurns = () =>
  new ScriptedEnv(text("Start"), [
    { obs: text("Obs 1"), reward: 0, done: false },
    { obs: text("Obs 2"), reward: 0, done: false },
    { obs: text("Obs 3"), reward: 1, done: true },
  ]);

describe("generationLimit (VAGEN main's arithmetic)", () => {
  test("what is left, or 0 under the floor", () => {
    // R = 100, 60 spent, 10 pending, 5 reserved: 25 left, over a floor of 20.
    expect(generationLimit(100, 20, 60, 10, 5)).toBe(25);
    // 30 more spent: 100 - 90 - 10 = 0 left.
    expect(generationLimit(100, 20, 90, 10)).toBe(0);
    // 19 left is under the floor of 20: no generation at all.
    expect(generationLimit(100, 20, 71, 10)).toBe(0);
    // A floor of 0 still needs one token.
    expect(generationLimit(10, 0, 10)).toBe(0);
    expect(generationLimit(10, 0, 9)).toBe(1);
  });

  test("the floor is a quarter of the budget, capped by the per-turn limit", () => {
    expect(generationFloor(100, undefined)).toBe(25);
    expect(generationFloor(100, 16)).toBe(16);
    expect(generationFloor(3, 8)).toBe(1);
  });
});

describe("the loop's conversations", () => {
  test("concat continues one conversation; compact, whose prompt is rebuilt, opens one per call", async () => {
    const concat = new ScriptedClient(up);
    const a = await concatHarness().runEpisode({ env: threeTurns(), client: concat, seed: 0, maxTurns: 5, sampling: {} });
    expect(concat.calls.map((c) => c.conversation)).toEqual(["scripted-0", "scripted-0", "scripted-0"]);
    expect(a.turns.map((turn) => turn.call)).toEqual([0, 1, 2].map((reply) => ({ conversation: 0, reply })));

    const compact = new ScriptedClient(up);
    const b = await compactHarness().runEpisode({ env: threeTurns(), client: compact, seed: 0, maxTurns: 5, sampling: {} });
    expect(compact.calls.map((c) => c.conversation)).toEqual(["scripted-0", "scripted-1", "scripted-2"]);
    expect(compact.released).toEqual(["scripted-0", "scripted-1", "scripted-2"]);
    expect(b.conversations!.map((c) => c.ordinal)).toEqual([0, 1, 2]);
    // compact's second prompt carries the text history of turn 1 and the new observation.
    const second = b.conversations![1]!.record;
    expect(t("Turn 1").every((id) => second.tokenIds.includes(id))).toBe(true);
  });

  test("observation_history continues one conversation of the observations and replies, with no system prompt, each observation reduced once", async () => {
    const client = new ScriptedClient(up);
    const episode = await observationHistoryHarness().runEpisode({ env: threeTurns(), client, seed: 0, maxTurns: 5, sampling: {} });
    expect(client.calls.map((c) => c.conversation)).toEqual(["scripted-0", "scripted-0", "scripted-0"]);
    expect(episode.conversations).toHaveLength(1);
    const prompts = episode.turns.map((turn) => turn.prompt);
    expect(prompts.map((p) => p.map((m) => m.role))).toEqual([["user"], ["user", "assistant", "user"], ["user", "assistant", "user", "assistant", "user"]]);
    expect(prompts[2]!.filter((m) => m.role === "user").map((m) => m.content.map((c) => (c.type === "text" ? c.text : "")).join(""))).toEqual(["Start", "Obs 1", "Obs 2"]);
    // The very objects sent before, which is what lets the loop continue the conversation.
    expect(prompts[2]![0]).toBe(prompts[0]![0]!);
    expect(prompts[2]![2]).toBe(prompts[1]![2]!);
  });

  test("a prompt equal in content but built anew opens a new conversation: continuation is by the loop's own messages, not by content", async () => {
    const client = new ScriptedClient(up);
    const rebuilt = defineHarness({
      name: "rebuilt",
      rowPerTurn: false,
      stopOnSuccess: false,
      // The same messages as concat, copied: nothing is compared by content.
      prompt: ({ system, initial, turns }) => [system, initial, ...turns.flatMap((turn) => [turn.assistant, turn.observation])].map((m) => ({ ...m })),
    });
    await rebuilt.runEpisode({ env: threeTurns(), client, seed: 0, maxTurns: 5, sampling: {} });
    expect(client.calls.map((c) => c.conversation)).toEqual(["scripted-0", "scripted-1", "scripted-2"]);
  });

  test("a seeded episode samples each call with its own derived seed, the same on every run", async () => {
    const run = async () => {
      const client = new ScriptedClient(up);
      await concatHarness().runEpisode({ env: threeTurns(), client, seed: 0, maxTurns: 5, sampling: { seed: 42 } });
      return client.calls.map((c) => c.seed!);
    };
    const seeds = await run();
    expect(seeds).toEqual([callSeed(42, 0), callSeed(42, 1), callSeed(42, 2)]);
    expect(new Set(seeds).size).toBe(3);
    expect(await run()).toEqual(seeds);
  });

  test("the model's context: an opening that cannot fit is unusable; a continuation that no longer fits ends the episode", async () => {
    // The opening prompt is 40 tokens with its generation prompt; turn 2's would be 44 + 12 + 8 = 64.
    const tight = new ScriptedClient(up, 40);
    const opening = await concatHarness().runEpisode({ env: threeTurns(), client: tight, seed: 0, maxTurns: 5, sampling: {} });
    expect([opening.finishReason, opening.unusable, tight.calls.length]).toEqual(["unusable", "context_too_large", 0]);

    const roomy = new ScriptedClient(up, 64);
    const later = await concatHarness().runEpisode({ env: threeTurns(), client: roomy, seed: 0, maxTurns: 5, sampling: {} });
    expect([later.finishReason, later.turns.length]).toEqual(["no_room", 1]);
  });

  test("tokenLevel: false sends whole message lists through create", async () => {
    const client = new ScriptedClient(up);
    const sent: number[] = [];
    client.create = async (messages) => {
      sent.push(messages.length);
      return { text: "Up", finishReason: "stop", usage: { promptTokens: 0, completionTokens: 1 } };
    };
    const episode = await concatHarness().runEpisode({ env: threeTurns(), client, seed: 0, maxTurns: 5, sampling: {}, tokenLevel: false });
    expect(sent).toEqual([2, 4, 6]);
    expect(episode.conversations).toBeUndefined();
    expect(client.calls).toEqual([]);
  });

  test("conversations are released when the episode is aborted or the model fails", async () => {
    const controller = new AbortController();
    const aborting = new ScriptedClient(() => {
      controller.abort();
      return up();
    });
    const run = concatHarness().runEpisode({ env: threeTurns(), client: aborting, seed: 0, maxTurns: 5, sampling: {}, signal: controller.signal });
    await expect(run).rejects.toThrow();
    expect(aborting.released).toEqual(["scripted-0"]);

    const failing = new ScriptedClient(() => {
      throw new Error("engine failed");
    });
    const episode = await concatHarness().runEpisode({ env: threeTurns(), client: failing, seed: 0, maxTurns: 5, sampling: {} });
    expect(episode.finishReason).toBe("model_error");
    expect(episode.error?.message).toBe("engine failed");
    expect(failing.released).toEqual(["scripted-0"]);
  });
});
