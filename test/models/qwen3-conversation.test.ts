/**
 * Token-level conversations in Qwen3's chat format (test/fixtures/qwen3_tiny's tokenizer
 * and template). Qwen3's template is not prefix-stable: it renders the newest reply after
 * the last query with a reasoning block and drops the block once another query follows.
 * The codec frames new messages against the history without assistant turns and keeps
 * every sampled token (reasoning included): a conversation's first prompt is the
 * template's own rendering, later turns append only their framing, in thinking mode (the
 * default) and with `enable_thinking: false`.
 */
import { describe, expect, test } from "bun:test";
import { join } from "node:path";
import type { ChatMessage } from "../../src/core/chat.ts";
import { VagenError } from "../../src/core/errors.ts";
import { ChatFraming } from "../../src/models/chat-framing.ts";
import { Conversation } from "../../src/models/conversation.ts";
import { Qwen3ConversationCodec } from "../../src/models/qwen3/conversation-codec.ts";
import { TextChatTemplate } from "../../src/models/text-chat-template.ts";
import { TextTokenizer } from "../../src/models/tokenizer.ts";
import { refsJson } from "./fixture.ts";

const DIR = join(import.meta.dir, "..", "fixtures", "qwen3_tiny");
const tokenizer = TextTokenizer.fromDir(DIR);
const template = TextChatTemplate.fromDirForText(DIR, "qwen3");
const refs = refsJson(DIR);
const t = (text: string) => tokenizer.encode(text);
const IM_END = tokenizer.tokenId("<|im_end|>");
const text = (c: Conversation) => tokenizer.decode(c.tokenIds, { skipSpecialTokens: false });

const msg = (role: ChatMessage["role"], content: string): ChatMessage => ({ role, content: [{ type: "text", text: content }] });
const SYSTEM = msg("system", "You are a careful agent.");
const USER_1 = msg("user", "Which way is the goal?");
const USER_2 = msg("user", "The box moved. What next?");

describe("Qwen3 token-level conversations, thinking mode (the template's default)", () => {
  const codec = new Qwen3ConversationCodec(tokenizer, template);

  test("the first prompt is apply_chat_template's; a reply with reasoning stays verbatim; the next turn appends only its framing", () => {
    const c = new Conversation(codec);
    c.addMessage(SYSTEM);
    c.addMessage(USER_1);
    expect(c.beginReply().tokenIds).toEqual(refs.cases.system!.input_ids!);
    const reply = [...t("<think>\nLeft is a hole.\n</think>\n\nRight"), IM_END];
    c.addReply({ tokenIds: reply, logprobs: reply.map(() => -1), finishReason: "stop" });
    c.addMessage(USER_2);
    c.beginReply();
    const first = refs.cases.system!.input_ids!;
    expect(c.tokenIds.slice(0, first.length + reply.length)).toEqual([...first, ...reply]);
    expect(text(c)).toBe(
      "<|im_start|>system\nYou are a careful agent.<|im_end|>\n<|im_start|>user\nWhich way is the goal?<|im_end|>\n<|im_start|>assistant\n" +
        "<think>\nLeft is a hole.\n</think>\n\nRight<|im_end|>\n<|im_start|>user\nThe box moved. What next?<|im_end|>\n<|im_start|>assistant\n",
    );
    // Re-rendering the messages would drop the reasoning the model saw; the conversation keeps it.
    const rendered = template.render(
      [SYSTEM, USER_1, msg("assistant", "<think>\nLeft is a hole.\n</think>\n\nRight"), USER_2].map((m) => ({ role: m.role, content: m.content.map((p) => ({ type: "text" as const, text: (p as { text: string }).text })) })),
      { addGenerationPrompt: true },
    );
    expect(rendered).not.toContain("Left is a hole");
    const record = c.record();
    expect(record.replySpans).toEqual([{ start: first.length, end: first.length + reply.length }]);
    expect(record.lossMask.reduce((a, b) => a + b, 0)).toBe(reply.length);
  });

  test("a reply cut by length gets the whole closing; the end of a turn is <|im_end|>", () => {
    const c = new Conversation(codec);
    c.addMessage(USER_1);
    const cut = t("<think>\nmaybe");
    c.beginReply();
    c.addReply({ tokenIds: cut, logprobs: cut.map(() => -2), finishReason: "length" });
    expect(text(c).endsWith("<think>\nmaybe<|im_end|>\n")).toBe(true);
    expect(c.endOfTurnId()).toBe(IM_END);
  });

  test("without its history view, Qwen3's template is not prefix-stable, and the framing says so", () => {
    const plain = new ChatFraming(template);
    const history = [
      { role: "user" as const, content: "Hi" },
      { role: "assistant" as const, content: "Hello" },
    ];
    expect(() => plain.messageText(history, { role: "user", content: "Again" })).toThrow(/not prefix-stable/);
    // And its thinking-mode reply is framed with a reasoning block a plain reply probe cannot see past.
    expect(() => plain.replyClosingText([{ role: "user", content: "Hi" }])).toThrow(/between the generation prompt and an assistant reply's content/);
  });

  test("an image is refused, naming the message and the family", () => {
    const c = new Conversation(codec);
    const image = { width: 1, height: 1, data: new Uint8Array(3) };
    expect(() => c.addMessage({ role: "user", content: [{ type: "image", image }] })).toThrow(VagenError);
    expect(() => c.addMessage({ role: "user", content: [{ type: "image", image }] })).toThrow("qwen3 is a text-only model family");
  });
});

describe("Qwen3 token-level conversations, enable_thinking: false", () => {
  const codec = new Qwen3ConversationCodec(tokenizer, template, { enable_thinking: false });

  test("the generation prompt carries the empty reasoning block, and the reply follows it directly", () => {
    const c = new Conversation(codec);
    c.addMessage(msg("user", "Count to five."));
    expect(c.beginReply().tokenIds).toEqual(refs.cases.no_think!.input_ids!);
    const reply = [...t("one two"), IM_END];
    c.addReply({ tokenIds: reply, logprobs: reply.map(() => -1) });
    c.addMessage(msg("user", "Describe the weather."));
    c.beginReply();
    expect(text(c)).toBe(
      "<|im_start|>user\nCount to five.<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\none two<|im_end|>\n" +
        "<|im_start|>user\nDescribe the weather.<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n",
    );
  });
});
