/**
 * The engine continuing a token-level conversation under an explicit session id (tiny
 * Qwen2.5-VL fixture, CPU, f32): the second turn prefills only the tokens after the
 * session's cached prefix, encodes only the new image, and samples what a fresh prefill
 * of the same ids samples; a prompt that does not continue the session is refused.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import type { ChatMessage } from "../../src/core/chat.ts";
import { loadEngine, type LoadedEngine } from "../../src/engine/load.ts";
import type { GenerateRequest } from "../../src/engine/types.ts";
import { Conversation } from "../../src/models/conversation.ts";
import { Qwen25VLConversationCodec } from "../../src/models/qwen2_5_vl/conversation-codec.ts";
import type { Qwen25VLChatModel } from "../../src/models/qwen2_5_vl/chat-model.ts";
import { FIXTURE_DIR, maxRelativeError, fixtureImage } from "../models/fixture.ts";

let loaded: LoadedEngine;
let qwen: Qwen25VLChatModel;

beforeAll(() => {
  loaded = loadEngine(FIXTURE_DIR, { device: "cpu", dtype: "f32", max_seq_len: 512, kv_cache_gib: 0.05, max_slots: 4 });
  qwen = loaded.model as Qwen25VLChatModel;
});
afterAll(async () => {
  await loaded.close();
});

const imageB = fixtureImage("b");
const imageC = fixtureImage("c");
const user = (image: typeof imageB, text: string): ChatMessage => ({ role: "user", content: [{ type: "image", image }, { type: "text", text }] });
/** Greedy, a fixed number of tokens: the random-weight fixture would stop at random otherwise. */
const SAMPLING: GenerateRequest["sampling"] = { temperature: 0, maxNewTokens: 4, ignoreStopTokens: true };

describe("the engine continuing a conversation (explicit session id)", () => {
  test("the next turn reuses the session's KV prefix: only new tokens are prefilled, only the new image encoded", async () => {
    const { engine } = loaded;
    const conversation = new Conversation(new Qwen25VLConversationCodec(qwen.processor));
    conversation.addMessage({ role: "system", content: [{ type: "text", text: "You are a tiny agent." }] });
    conversation.addMessage(user(imageB, "Go left or right?"));

    const prompt1 = conversation.beginReply();
    const before1 = engine.stats();
    const encoded1 = qwen.imagesEncoded;
    const turn1 = await engine.generate({ prompt: prompt1, sessionId: "episode-0", continuesSession: true, sampling: SAMPLING });
    expect(turn1.cachedPromptTokens).toBe(0);
    expect(engine.stats().prefillTokens - before1.prefillTokens).toBe(prompt1.tokenIds.length);
    expect(qwen.imagesEncoded - encoded1).toBe(1);

    conversation.addReply({ tokenIds: turn1.tokenIds, logprobs: turn1.logprobs, finishReason: turn1.finishReason });
    conversation.addMessage(user(imageC, "Where now?"));
    const prompt2 = conversation.beginReply();
    // The new prompt is the old one, the 4 sampled ids, then new tokens: nothing re-tokenized.
    expect(prompt2.tokenIds.slice(0, prompt1.tokenIds.length + 4)).toEqual([...prompt1.tokenIds, ...turn1.tokenIds]);

    const before2 = engine.stats();
    const encoded2 = qwen.imagesEncoded;
    const turn2 = await engine.generate({ prompt: prompt2, sessionId: "episode-0", continuesSession: true, sampling: SAMPLING, returnLogits: true });
    // The slot holds the first prompt and the sampled ids whose KV was computed: all but the
    // last one, which was sampled but never fed back.
    const reused = prompt1.tokenIds.length + turn1.tokenIds.length - 1;
    expect(turn2.cachedPromptTokens).toBe(reused);
    expect(engine.stats().cachedPromptTokens - before2.cachedPromptTokens).toBe(reused);
    expect(engine.stats().prefillTokens - before2.prefillTokens).toBe(prompt2.tokenIds.length - reused);
    expect(qwen.imagesEncoded - encoded2).toBe(1); // image c only; b's KV is reused

    // A fresh prefill of the same ids (no session) samples the same tokens from the same logits.
    const fresh = await engine.generate({ prompt: prompt2, sampling: SAMPLING, returnLogits: true });
    expect(fresh.cachedPromptTokens).toBe(0);
    expect(turn2.tokenIds).toEqual(fresh.tokenIds);
    turn2.logits!.forEach((row, i) => expect(maxRelativeError(row, fresh.logits![i]!)).toBeLessThan(1e-4));
    engine.releaseSession("episode-0");
  });

  test("a prompt that does not continue the session is refused and the session dropped", async () => {
    const { engine } = loaded;
    const codec = new Qwen25VLConversationCodec(qwen.processor);
    const first = new Conversation(codec);
    first.addMessage(user(imageB, "Go left or right?"));
    await engine.generate({ prompt: first.beginReply(), sessionId: "episode-1", continuesSession: true, sampling: SAMPLING });

    const other = new Conversation(codec);
    other.addMessage(user(imageC, "Something else entirely."));
    const idle = engine.stats().idleSessions;
    await expect(engine.generate({ prompt: other.beginReply(), sessionId: "episode-1", continuesSession: true, sampling: SAMPLING })).rejects.toThrow(
      "does not continue the session's",
    );
    expect(engine.stats().idleSessions).toBe(idle - 1);
  });
});
