/**
 * Token-level conversations over the tiny Qwen2.5-VL fixture's tokenizer and chat
 * template: a conversation built turn by turn equals its ids, masks and image spans
 * written out by hand; the template + processor rendering the same messages in one go
 * gives the same ids when the reply text re-tokenizes identically; and where it would not,
 * the conversation keeps the sampled ids.
 */
import { describe, expect, test } from "bun:test";
import type { ChatMessage } from "../../src/core/chat.ts";
import { VagenError } from "../../src/core/errors.ts";
import { ChatTemplate, toTemplateMessages } from "../../src/models/chat-template.ts";
import { Conversation, type SampledReply } from "../../src/models/conversation.ts";
import { imageKey } from "../../src/models/image-key.ts";
import { DEFAULT_IMAGE_PROCESSOR } from "../../src/models/image-processor.ts";
import { Qwen25VLConversationCodec } from "../../src/models/qwen2_5_vl/conversation-codec.ts";
import { Qwen25VLProcessor } from "../../src/models/qwen2_5_vl/processor.ts";
import { TextTokenizer } from "../../src/models/tokenizer.ts";
import { FIXTURE_DIR, fixtureImage } from "./fixture.ts";

const tokenizer = TextTokenizer.fromDir(FIXTURE_DIR);
const template = ChatTemplate.fromDir(FIXTURE_DIR);
const processor = new Qwen25VLProcessor(tokenizer, template, DEFAULT_IMAGE_PROCESSOR, 366);
const codec = new Qwen25VLConversationCodec(processor);

// The fixture's special ids (tokenizer.json's added tokens) and the newline byte token.
const IM_START = 361;
const IM_END = 362;
const VISION_START = 363;
const VISION_END = 364;
const PAD = 366;
const NL = 198;
/** Text between two special tokens is tokenized on its own, so a piece's ids are its encoding. */
const t = (text: string) => tokenizer.encode(text);
const pads = (n: number) => new Array<number>(n).fill(PAD);

// b.png is 56x56: smart resize keeps 56x56, a grid of 4x4 patches of 14 px, merged 2x2 -> 4 tokens.
// c.png is 100x75: resized to 112x84 (multiples of 28), a 6x8 grid -> 48 / 4 = 12 tokens.
const imageB = fixtureImage("b");
const imageC = fixtureImage("c");

const SYSTEM: ChatMessage = { role: "system", content: [{ type: "text", text: "You are a tiny agent." }] };
const USER_1: ChatMessage = { role: "user", content: [{ type: "image", image: imageB }, { type: "text", text: "Go left or right?" }] };
const USER_2: ChatMessage = { role: "user", content: [{ type: "image", image: imageC }, { type: "text", text: "Where now?" }] };
/** "Left" then the end-of-turn token, sampled: the model stopped by itself. */
const REPLY_1 = { tokenIds: [...t("Left"), IM_END], logprobs: [-0.5, -0.25, -0.125], finishReason: "stop" };
/** "Right," cut by the token limit: no end-of-turn token was sampled. */
const REPLY_2 = { tokenIds: t("Right,"), logprobs: [-1, -2, -3, -4, -5], finishReason: "length" };

function buildTurnByTurn(reply1: SampledReply = REPLY_1): Conversation {
  const conversation = new Conversation(codec);
  conversation.addMessage(SYSTEM);
  conversation.addMessage(USER_1);
  conversation.beginReply();
  conversation.addReply(reply1);
  conversation.addMessage(USER_2);
  conversation.beginReply();
  conversation.addReply(REPLY_2);
  return conversation;
}

describe("Conversation (Qwen2.5-VL tiny fixture)", () => {
  test("built turn by turn: ids, loss mask, log-probs, turns and image spans as written out by hand", () => {
    expect(t("Left")).toEqual([43, 333]);
    expect(t("Right,")).toEqual([49, 72, 336, 83, 11]);
    const system = [IM_START, ...t("system\nYou are a tiny agent."), IM_END, NL]; // 1 + 18 + 1 + 1 = 21: [0, 21)
    const user1 = [IM_START, ...t("user\n"), VISION_START, ...pads(4), VISION_END, ...t("Go left or right?"), IM_END, NL]; // 1+4+1+4+1+10+1+1 = 23: [21, 44)
    const header = [IM_START, ...t("assistant\n")]; // 1 + 7 = 8
    const reply1 = [43, 333, IM_END]; // [44 + 8 = 52, 55), sampled; then NL alone closes the turn: [55, 56)
    const user2 = [IM_START, ...t("user\n"), VISION_START, ...pads(12), VISION_END, ...t("Where now?"), IM_END, NL]; // 1+4+1+12+1+7+1+1 = 28: [56, 84)
    const reply2 = [49, 72, 336, 83, 11]; // header [84, 92), sampled [92, 97); the whole closing IM_END NL, unsampled: [97, 99)
    expect([system.length, user1.length, header.length, user2.length]).toEqual([21, 23, 8, 28]);

    const expectedIds = [...system, ...user1, ...header, ...reply1, NL, ...user2, ...header, ...reply2, IM_END, NL];
    const zeros = (n: number) => new Array<number>(n).fill(0);
    const ones = (n: number) => new Array<number>(n).fill(1);
    // Mask 1 exactly at the sampled ids: "Left" + the sampled IM_END, and "Right,".
    const expectedMask = [...zeros(52), ...ones(3), ...zeros(1 + 28 + 8), ...ones(5), ...zeros(2)];
    const expectedLogprobs = [...zeros(52), -0.5, -0.25, -0.125, ...zeros(37), -1, -2, -3, -4, -5, 0, 0];

    const record = buildTurnByTurn().record();
    expect(record.tokenIds).toEqual(expectedIds);
    expect(record.tokenIds.length).toBe(99);
    expect(record.lossMask).toEqual(expectedMask);
    expect(record.logprobs).toEqual(expectedLogprobs);
    expect(record.logprobsComplete).toBe(true);
    expect(record.promptLength).toBe(52);
    expect(record.replySpans).toEqual([{ start: 52, end: 55 }, { start: 92, end: 97 }]);
    expect(record.turns).toEqual([
      { role: "system", start: 0, end: 21 },
      { role: "user", start: 21, end: 44 },
      { role: "assistant", start: 44, end: 56, sampled: { start: 52, end: 55 }, finishReason: "stop" },
      { role: "user", start: 56, end: 84 },
      { role: "assistant", start: 84, end: 99, sampled: { start: 92, end: 97 }, finishReason: "length" },
    ]);
    // Image b: user turn at 21 + IM_START + "user\n" (4) + VISION_START = 27, 4 pads.
    // Image c: user turn at 56 + 1 + 4 + 1 = 62, 12 pads.
    expect(record.images).toEqual([
      { offset: 27, length: 4, image: imageB, key: imageKey(imageB), grid: [1, 4, 4] },
      { offset: 62, length: 12, image: imageC, key: imageKey(imageC), grid: [1, 6, 8] },
    ]);
    for (const span of record.images) expect(new Set(record.tokenIds.slice(span.offset, span.offset + span.length))).toEqual(new Set([PAD]));
  });

  test("beginReply returns what an engine continues: the ids so far, ending with the generation prompt, and the image spans", () => {
    const conversation = new Conversation(codec);
    conversation.addMessage(SYSTEM);
    conversation.addMessage(USER_1);
    const prompt = conversation.beginReply();
    expect(prompt.tokenIds.length).toBe(52);
    expect(prompt.tokenIds.slice(44)).toEqual([IM_START, ...t("assistant\n")]);
    expect(prompt.images.map((i) => [i.offset, i.length])).toEqual([[27, 4]]);
    expect(conversation.awaitingReply).toBe(true);
    // The prompt is a copy: the conversation growing does not change it.
    conversation.addReply(REPLY_1);
    expect(prompt.tokenIds.length).toBe(52);
  });

  test("the template + processor rendering the same messages in one go gives the same ids", () => {
    const conversation = buildTurnByTurn();
    const messages: ChatMessage[] = [
      SYSTEM,
      USER_1,
      { role: "assistant", content: [{ type: "text", text: "Left" }] },
      USER_2,
      { role: "assistant", content: [{ type: "text", text: "Right," }] },
    ];
    const { messages: templateMessages, images } = toTemplateMessages(messages);
    const full = processor.encodeChat(templateMessages, images, { addGenerationPrompt: false, pixels: false });
    expect(conversation.tokenIds).toEqual(full.inputIds);
    expect(conversation.images.map((i) => i.grid)).toEqual(full.gridThw);

    // And mid-conversation, the engine's prompt equals a rendering with the generation prompt.
    const opened = new Conversation(codec);
    opened.addMessage(SYSTEM);
    opened.addMessage(USER_1);
    const { messages: firstTurn, images: firstImages } = toTemplateMessages([SYSTEM, USER_1]);
    expect(opened.beginReply().tokenIds).toEqual(processor.encodeChat(firstTurn, firstImages, { pixels: false }).inputIds);
  });

  test("sampled ids that re-tokenize differently are kept as sampled", () => {
    // The model spelled "Left" byte by byte: L e f t (ids 43 68 69 83) then IM_END. The text
    // is the same, but encoding it gives the merged ids [43, 333].
    const byteByByte = { tokenIds: [43, 68, 69, 83, IM_END], logprobs: [-1, -1, -1, -1, -1] };
    expect(tokenizer.decode(byteByByte.tokenIds, { skipSpecialTokens: true })).toBe("Left");
    const conversation = buildTurnByTurn(byteByByte);
    const ids = conversation.tokenIds;
    expect(ids.slice(52, 57)).toEqual([43, 68, 69, 83, IM_END]);
    expect(conversation.lossMask.slice(52, 57)).toEqual([1, 1, 1, 1, 1]);

    const { messages, images } = toTemplateMessages([
      SYSTEM,
      USER_1,
      { role: "assistant", content: [{ type: "text", text: "Left" }] },
      USER_2,
      { role: "assistant", content: [{ type: "text", text: "Right," }] },
    ]);
    const rerendered = processor.encodeChat(messages, images, { addGenerationPrompt: false, pixels: false }).inputIds;
    // Re-rendering would replace the sampled 43 68 69 83 by 43 333: two tokens fewer.
    expect(rerendered).toEqual([...ids.slice(0, 52), 43, 333, ...ids.slice(56)]);
    expect(rerendered).not.toEqual([...ids]);
    // The conversation keeps the two extra tokens, so image c sits at 62 + 2 = 64.
    expect(conversation.images.map((i) => i.offset)).toEqual([27, 64]);
  });

  test("a reply without log-probs marks the record incomplete; mismatched log-probs are refused", () => {
    const conversation = new Conversation(codec);
    conversation.addMessage(USER_1);
    conversation.beginReply();
    expect(() => conversation.addReply({ tokenIds: [43, 333], logprobs: [-1] })).toThrow("2 token id(s) but 1 log-prob(s)");
    conversation.addReply({ tokenIds: [43, 333, IM_END] });
    const record = conversation.record();
    expect(record.logprobsComplete).toBe(false);
    expect(record.lossMask.filter((m) => m === 1).length).toBe(3);
    // No system message: the template's default system prompt is part of the first message's framing.
    expect(tokenizer.decode(record.tokenIds.slice(0, record.turns[0]!.end))).toStartWith("<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n<|im_start|>user\n");
  });

  test("the closing rule: only a sampled IM_END stands in for the closing's first token", () => {
    const ENDOFTEXT = 360;
    const closeWith = (tokenIds: number[]) => {
      const conversation = new Conversation(codec);
      conversation.addMessage(SYSTEM);
      conversation.beginReply(); // [0, 21) system, [21, 29) header
      conversation.addReply({ tokenIds, logprobs: tokenIds.map(() => -1) });
      return { ids: conversation.tokenIds.slice(29), mask: conversation.lossMask.slice(29) };
    };
    // Sampled IM_END: it is the closing's first token, so only NL follows, unsampled.
    expect(closeWith([43, 333, IM_END])).toEqual({ ids: [43, 333, IM_END, NL], mask: [1, 1, 1, 0] });
    // Another end-of-text id is kept as sampled, and the whole closing follows it.
    expect(closeWith([43, 333, ENDOFTEXT])).toEqual({ ids: [43, 333, ENDOFTEXT, IM_END, NL], mask: [1, 1, 1, 0, 0] });
    // An empty generation (an abort) still closes the turn.
    expect(closeWith([])).toEqual({ ids: [IM_END, NL], mask: [0, 0] });
  });

  test("replies and messages must alternate through beginReply", () => {
    const conversation = new Conversation(codec);
    conversation.addMessage(USER_1);
    expect(() => conversation.addReply(REPLY_1)).toThrow("beginReply() first");
    conversation.beginReply();
    expect(() => conversation.addMessage(USER_2)).toThrow("while a reply is awaited");
    expect(() => conversation.beginReply()).toThrow("while a reply is awaited");
  });

  test("a template that rewrites earlier turns is refused, naming the template", () => {
    // Numbers every message by how many there are: each new message changes the first line.
    const unstable = new ChatTemplate(
      "{{ messages|length }} messages\n{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}",
      "unstable.jinja",
    );
    const conversation = new Conversation(new Qwen25VLConversationCodec(new Qwen25VLProcessor(tokenizer, unstable, DEFAULT_IMAGE_PROCESSOR, 366)));
    // The first message is framed against nothing (what a template writes before any
    // message is part of it); the second shows the rewrite.
    conversation.addMessage({ role: "user", content: [{ type: "text", text: "hi" }] });
    let error: unknown;
    try {
      conversation.addMessage({ role: "user", content: [{ type: "text", text: "again" }] });
    } catch (e) {
      error = e;
    }
    expect(error).toBeInstanceOf(VagenError);
    expect((error as Error).message).toContain("unstable.jinja: the chat template is not prefix-stable");
    expect((error as Error).message).toContain('"1 messages');
  });
});
