/**
 * A chat template's framing of one message, found by rendering: what the template writes
 * for a new message is the text it adds when the message joins the conversation.
 *
 * A token-level conversation never re-renders its history; it appends each new message's
 * own text. That is only right when the template is prefix-stable: rendering the history
 * plus one message must begin with the rendering of the history alone. Every finder here
 * checks that and fails, naming the template, where it does not hold (templates that
 * rewrite earlier turns, e.g. by dropping past reasoning, cannot be continued this way).
 */
import { VagenError } from "../core/errors.ts";
import type { ChatTemplate, TemplateMessage, TemplateRole } from "./chat-template.ts";

/**
 * Stands for an assistant reply's content while rendering, to find where the template puts
 * the content and what it writes after it. Plain ASCII that no template transforms.
 */
const REPLY_SENTINEL = "VAGEN_REPLY_CONTENT_7f3a91";

export class ChatFraming {
  constructor(
    readonly template: ChatTemplate,
    /** Extra template variables (bos_token, add_vision_id, ...), as `ChatTemplate.render` takes them. */
    private readonly variables?: Record<string, unknown>,
  ) {}

  /** The text the template adds for `message` after `history` (a default system prompt included). */
  messageText(history: readonly TemplateMessage[], message: TemplateMessage): string {
    const before = this.renderHistory(history);
    const after = this.render([...history, message], false);
    return this.suffix(before, after, `one more ${message.role} message`);
  }

  /** The assistant header the template ends a prompt with (`add_generation_prompt`). */
  generationPromptText(history: readonly TemplateMessage[]): string {
    const before = this.renderHistory(history);
    const after = this.render(history, true);
    return this.suffix(before, after, "the generation prompt");
  }

  /**
   * What the template writes after an assistant reply's content (for Qwen: `<|im_end|>\n`).
   * The content must follow the generation prompt directly: the model's sampled tokens are
   * what comes after the generation prompt, so text the template would put in between
   * (an empty reasoning block, say) would make the record differ from what the model saw.
   */
  replyClosingText(history: readonly TemplateMessage[]): string {
    const prompted = this.render(history, true);
    const replied = this.render([...history, { role: "assistant" as TemplateRole, content: REPLY_SENTINEL }], false);
    const body = this.suffix(prompted, replied, "an assistant reply after the generation prompt");
    const at = body.indexOf(REPLY_SENTINEL);
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
    return body.slice(REPLY_SENTINEL.length);
  }

  /**
   * The history rendered without a generation prompt. An empty history renders as the
   * template writes it for no messages; templates that refuse an empty list (they raise)
   * are taken to write nothing before the first message.
   */
  private renderHistory(history: readonly TemplateMessage[]): string {
    if (history.length > 0) return this.render(history, false);
    try {
      return this.render([], false);
    } catch {
      return "";
    }
  }

  private render(messages: readonly TemplateMessage[], addGenerationPrompt: boolean): string {
    return this.template.render(messages, { addGenerationPrompt, variables: this.variables });
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
