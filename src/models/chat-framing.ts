/**
 * A chat template's framing of one message, found by rendering: what the template writes
 * for a new message is the text it adds when the message joins the conversation.
 *
 * A token-level conversation never re-renders its history; it appends each new message's
 * own text. That is only right when the template is prefix-stable: rendering the history
 * plus one message must begin with the rendering of the history alone. Every finder here
 * checks that and fails, naming the template, where it does not hold. A template that
 * rewrites earlier turns (Qwen3 drops past reasoning) can still be framed when its family
 * says which part of the history a new message's framing depends on
 * (`FramingOptions.framingHistory`): the comparison then runs on that view.
 */
import { VagenError } from "../core/errors.ts";
import { LruMap } from "../core/lru.ts";
import type { ChatTemplate, TemplateMessage, TemplateRole } from "./chat-template.ts";

/**
 * Stands for an assistant reply's content while rendering, to find where the template puts
 * the content and what it writes after it. Plain ASCII that no template transforms.
 */
const REPLY_SENTINEL = "VAGEN_REPLY_CONTENT_7f3a91";

export interface FramingOptions {
  /** Extra template variables (bos_token, add_vision_id, enable_thinking, ...), as `ChatTemplate.render` takes them. */
  variables?: Record<string, unknown>;
  /**
   * The history a new message is framed against; default: the history as it is. For a
   * template that rewrites earlier turns when a later one arrives, the family passes the
   * part of the history the framing of a new message depends on, so the rewriting never
   * enters the comparison. Qwen3 renders an assistant turn after the last user query
   * with a reasoning block and the same turn without one once another query follows;
   * its user and system framing does not depend on assistant turns, so its view drops
   * them. The conversation keeps the tokens it has either way (never re-rendered).
   */
  framingHistory?: (history: readonly TemplateMessage[]) => TemplateMessage[];
  /**
   * An assistant reply's content as the model writes it, which the template must write
   * verbatim right after the generation prompt; default a plain sentinel. A reasoning
   * model's reply begins with its reasoning block (Qwen3 in thinking mode: `<think>`,
   * reasoning, `</think>`, the answer), which its template writes as it came.
   */
  replyProbe?: string;
}

/** Renderings kept per framing, and the longest key kept (a long history rarely recurs). */
const RENDER_MEMO_ENTRIES = 1024;
const RENDER_MEMO_MAX_KEY = 16_384;

export class ChatFraming {
  private readonly variables: Record<string, unknown> | undefined;
  /**
   * Renderings by their messages. Framing one message renders the history two or three
   * times, and a rollout frames the same few messages (the system prompt, an observation
   * whose text does not change) every turn of every episode: the template engine was a
   * tenth of a rollout's host time.
   */
  private readonly rendered = new LruMap<string, string>(RENDER_MEMO_ENTRIES);
  private readonly view: (history: readonly TemplateMessage[]) => readonly TemplateMessage[];
  private readonly replyProbe: string;

  constructor(
    readonly template: ChatTemplate,
    options: FramingOptions = {},
  ) {
    this.variables = options.variables;
    this.view = options.framingHistory ?? ((history) => history);
    this.replyProbe = options.replyProbe ?? REPLY_SENTINEL;
  }

  /** The text the template adds for `message` after `history` (a default system prompt included). */
  messageText(history: readonly TemplateMessage[], message: TemplateMessage): string {
    const seen = this.view(history);
    const before = this.renderHistory(seen);
    const after = this.render([...seen, message], false);
    return this.suffix(before, after, `one more ${message.role} message`);
  }

  /** The assistant header the template ends a prompt with (`add_generation_prompt`). */
  generationPromptText(history: readonly TemplateMessage[]): string {
    const seen = this.view(history);
    const before = this.renderHistory(seen);
    const after = this.render(seen, true);
    return this.suffix(before, after, "the generation prompt");
  }

  /**
   * What the template writes after an assistant reply's content (for Qwen: `<|im_end|>\n`).
   * The content must follow the generation prompt directly: the model's sampled tokens are
   * what comes after the generation prompt, so text the template would put in between
   * (an empty reasoning block, say) would make the record differ from what the model saw.
   */
  replyClosingText(history: readonly TemplateMessage[]): string {
    const seen = this.view(history);
    const probe = this.replyProbe;
    const prompted = this.render(seen, true);
    const replied = this.render([...seen, { role: "assistant" as TemplateRole, content: probe }], false);
    const body = this.suffix(prompted, replied, "an assistant reply after the generation prompt");
    const at = body.indexOf(probe);
    if (at < 0) {
      throw new VagenError(
        `${this.template.origin}: the chat template does not write an assistant reply's content verbatim (rendered ${JSON.stringify(body.slice(0, 60))})`,
        "token-level conversations keep the sampled tokens as they are, so the template must not rewrite reply text",
      );
    }
    if (at > 0) {
      throw new VagenError(
        `${this.template.origin}: the chat template writes ${JSON.stringify(body.slice(0, at))} between the generation prompt and an assistant reply's content`,
        "token-level conversations need the reply's content right after the generation prompt",
      );
    }
    return body.slice(probe.length);
  }

  /**
   * The history rendered without a generation prompt. An empty history is the empty
   * text: what a template writes before any message (GLM-4V's `[gMASK]<sop>`) belongs to
   * the first message's framing, so a conversation's tokens begin as the template's
   * rendering does.
   */
  private renderHistory(history: readonly TemplateMessage[]): string {
    return history.length > 0 ? this.render(history, false) : "";
  }

  private render(messages: readonly TemplateMessage[], addGenerationPrompt: boolean): string {
    const make = () => this.template.render(messages, { addGenerationPrompt, variables: this.variables });
    const key = JSON.stringify([addGenerationPrompt, messages]);
    return key.length > RENDER_MEMO_MAX_KEY ? make() : this.rendered.getOrMake(key, make);
  }

  private suffix(before: string, after: string, what: string): string {
    if (after.startsWith(before)) return after.slice(before.length);
    let i = 0;
    while (i < before.length && before[i] === after[i]) i++;
    throw new VagenError(
      `${this.template.origin}: the chat template is not prefix-stable: adding ${what} changes the text rendered before it (first difference at character ${i}: ${JSON.stringify(before.slice(i, i + 30))} became ${JSON.stringify(after.slice(i, i + 30))})`,
      "a token-level conversation appends each message's tokens and never re-renders its history; this template rewrites earlier turns, so use the message-level path for it",
    );
  }
}
