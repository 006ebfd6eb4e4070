/**
 * Episodes on the in-process engine (tiny Qwen2.5-VL fixture, CPU, f32) keep a
 * token-level conversation under an explicit session id: a concat episode's row holds
 * exactly the ids the engine sampled, with its log-probs; each turn prefills only the
 * tokens added since the session's cached prefix; every session is released when the
 * episode ends; and the message path (the HTTP server's) still reuses a session whose
 * prompt an earlier request ran.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { join } from "node:path";
import { EngineClient, engineClientFor } from "../../src/clients/engine-client.ts";
import { loadEngine, type LoadedEngine } from "../../src/engine/load.ts";
import { concatHarness } from "../../src/harness/concat.ts";
import { noConcatHarness } from "../../src/harness/no-concat.ts";
import type { TurnRecord } from "../../src/harness/types.ts";
import { collectRollouts } from "../../src/rollout/collect.ts";
import { rowsFromEpisode } from "../../src/rollout/rows.ts";
import { FIXTURE_DIR, fixtureImage } from "../models/fixture.ts";
import { ScriptedEnv } from "../rollout/scripted.ts";

let loaded: LoadedEngine;

beforeAll(() => {
  loaded = loadEngine(FIXTURE_DIR, { device: "cpu", dtype: "f32", max_seq_len: 512, kv_cache_gib: 0.05, max_slots: 4 });
});
afterAll(async () => {
  await loaded.close();
});

const imageB = fixtureImage("b");
const imageC = fixtureImage("c");
/** Three turns, an image observation each time. */
const imageEnv = () =>
  new ScriptedEnv({ text: "<image>Go left or right?", images: [imageB] }, [
    { obs: { text: "<image>Where now?", images: [imageC] }, reward: 0.25, done: false },
    { obs: { text: "<image>And now?", images: [imageB] }, reward: 0.5, done: false },
    { obs: { text: "done", images: [] }, reward: 1, done: true },
  ]);
/** A fixed number of tokens per turn (the random-weight fixture would stop at random otherwise); seeded. */
const SAMPLING = { temperature: 1, maxTokens: 4, seed: 5 };

describe("harness episodes on the engine's token-level conversations", () => {
  test("concat: the row's model tokens are the sampled ids; each turn prefills only its new tokens; the session is released", async () => {
    const client = new EngineClient(loaded.engine, loaded.builder, { defaults: { ignoreStopTokens: true }, codec: loaded.model.conversationCodec() });
    const { engine } = loaded;
    const prefills: number[] = [];
    let before = engine.stats().prefillTokens;
    const idle = engine.stats().idleSessions;
    const onTurn = (_turn: TurnRecord) => {
      prefills.push(engine.stats().prefillTokens - before);
      before = engine.stats().prefillTokens;
    };
    const episode = await concatHarness().runEpisode({ env: imageEnv(), client, seed: 0, maxTurns: 3, sampling: SAMPLING, onTurn });
    expect(episode.finishReason).toBe("done");
    expect(engine.stats().idleSessions).toBe(idle); // released

    const conversation = episode.conversations![0]!.record;
    expect(episode.conversations).toHaveLength(1);
    const sampled = episode.turns.map((t) => t.completion.tokenIds!);
    expect(sampled.map((ids) => ids.length)).toEqual([4, 4, 4]);
    // Each reply span holds exactly the sampled ids.
    conversation.replySpans.forEach((span, k) => expect(conversation.tokenIds.slice(span.start, span.end)).toEqual(sampled[k]!));
    // Prefill: the whole first prompt, then only what follows the cached prefix (the previous
    // prompt and its sampled ids but the last, which was sampled and never fed back).
    const [s1, s2, s3] = conversation.replySpans as [{ start: number; end: number }, { start: number; end: number }, { start: number; end: number }];
    expect(prefills).toEqual([s1.start, s2.start - (s1.end - 1), s3.start - (s2.end - 1)]);

    const row = rowsFromEpisode(episode, { uid: "u", episodeId: "e", trajIndex: 0, env: "scripted", seed: 0 }).rows[0]!;
    const trained = row.responseIds.filter((_, j) => row.responseMask[j] === 1);
    expect(trained).toEqual(sampled.flat());
    expect(row.rolloutLogprobs.filter((_, j) => row.responseMask[j] === 1)).toEqual(episode.turns.flatMap((t) => t.completion.logprobs!));
    expect(row.images.map((i) => i.image)).toEqual([imageB, imageC, imageB]);
    // The sampled ids are not what re-encoding their text gives (random weights write odd
    // token sequences), which is why the row keeps ids, not text.
    const tokenizer = loaded.model.tokenizer;
    expect(sampled.some((ids) => tokenizer.encode(loaded.model.decode(ids)).join(",") !== ids.join(","))).toBe(true);
  });

  test("no_concat opens a session per model call and releases each", async () => {
    const client = engineClientFor(loaded);
    const idle = loaded.engine.stats().idleSessions;
    const episode = await noConcatHarness().runEpisode({ env: imageEnv(), client, seed: 0, maxTurns: 2, sampling: { ...SAMPLING, maxTokens: 2 } });
    expect(episode.conversations!.map((c) => c.ordinal)).toEqual(episode.turns.map((_, i) => i));
    expect(episode.turns.map((t) => t.call)).toEqual(episode.turns.map((_, i) => ({ conversation: i, reply: 0 })));
    expect(loaded.engine.stats().idleSessions).toBe(idle);
  });

  test("more episodes than KV slots: idle sessions are evicted and re-prefilled; every row still holds exactly the sampled ids", async () => {
    const client = engineClientFor(loaded);
    const evictions = loaded.engine.stats().evictions;
    const batch = await collectRollouts({
      client,
      items: [0, 1, 2].map((seed) => ({ env: "scripted", seed })),
      n: 2,
      harness: concatHarness(),
      sampling: { temperature: 1, maxTokens: 2 },
      maxTurns: 3,
      seed: 3,
      createEnv: async () => imageEnv(),
    });
    expect(batch.episodes).toHaveLength(6); // 6 sessions over 4 slots
    expect(loaded.engine.stats().evictions).toBeGreaterThan(evictions);
    for (const episode of batch.episodes) {
      if (episode.dropped) continue;
      const row = episode.rows[0]!;
      expect(row.responseIds.filter((_, j) => row.responseMask[j] === 1)).toEqual(episode.record.turns.flatMap((t) => t.completion.tokenIds!));
    }
    expect(batch.rows.length).toBeGreaterThan(0);
  }, 60_000);

  test("the message path continues the session whose prompt a request starts with", async () => {
    const client = engineClientFor(loaded);
    const system = { role: "system" as const, content: [{ type: "text" as const, text: "You are a tiny agent." }] };
    const user = { role: "user" as const, content: [{ type: "image" as const, image: imageB }, { type: "text" as const, text: "Go?" }] };
    const first = await client.generate([system, user], { temperature: 0, maxNewTokens: 3, ignoreStopTokens: true });
    const reply = { role: "assistant" as const, content: [{ type: "text" as const, text: first.text }] };
    const second = await client.generate([system, user, reply, { role: "user", content: [{ type: "text", text: "Again?" }] }], { temperature: 0, maxNewTokens: 3 });
    expect(second.cachedPromptTokens).toBeGreaterThanOrEqual(first.promptTokens - 1);
    // A different conversation does not take that session.
    const other = await client.generate([{ role: "user", content: [{ type: "text", text: "Hello" }] }], { temperature: 0, maxNewTokens: 2 });
    expect(other.cachedPromptTokens).toBe(0);
    await client.close();
  });
});
