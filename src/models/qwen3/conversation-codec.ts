/**
 * Qwen3 behind the conversation's codec seam: the tokenizer (text only, no placeholders)
 * and the chat template's framing, told how Qwen3's template rewrites history.
 *
 * Qwen3's template renders an assistant turn after the last user query with a reasoning
 * block (an empty `<think>\n\n</think>\n\n` when the reply had none) and drops that block
 * once another query follows, so it is not prefix-stable. A token-level conversation
 * keeps every sampled token, reasoning included, and never re-renders; its framing is
 * found against the history without assistant turns (Qwen3 frames user and system
 * messages the same whatever the assistant said), and the reply probe is what the model
 * writes in the mode the template is rendered in: in thinking mode (the default, as in
 * transformers) a reasoning block then the answer after `<|im_start|>assistant\n`; with
 * `enable_thinking: false` the template itself writes the empty block into the
 * generation prompt and the model writes only the answer.
 */
import type { RGBImage } from "../../core/image.ts";
import { VagenError } from "../../core/errors.ts";
import { ChatFraming } from "../chat-framing.ts";
import type { TemplateMessage } from "../chat-template.ts";
import type { ConversationCodec, EncodedText } from "../conversation.ts";
import type { TextChatTemplate } from "../text-chat-template.ts";
import type { TextTokenizer } from "../tokenizer.ts";

/** A reply in thinking mode: plain ASCII the template splits at `</think>` and writes back as it came. */
const THINKING_REPLY_PROBE = "<think>\nVAGEN_REASONING_5c81d2\n</think>\n\nVAGEN_ANSWER_5c81d2";

/** Whether the template renders in thinking mode: unless `enable_thinking` is false, as the template tests it. */
export function thinkingEnabled(variables: Readonly<Record<string, unknown>> | undefined): boolean {
  return variables?.enable_thinking !== false;
}

/** The history as Qwen3's framing of a new message depends on it: its non-assistant turns. */
function withoutAssistantTurns(history: readonly TemplateMessage[]): TemplateMessage[] {
  return history.filter((m) => m.role !== "assistant");
}

export class Qwen3ConversationCodec implements ConversationCodec {
  readonly framing: ChatFraming;

  constructor(
    readonly tokenizer: TextTokenizer,
    template: TextChatTemplate,
    variables?: Readonly<Record<string, unknown>>,
  ) {
    this.framing = new ChatFraming(template, {
      variables: variables && { ...variables },
      framingHistory: withoutAssistantTurns,
      replyProbe: thinkingEnabled(variables) ? THINKING_REPLY_PROBE : undefined,
    });
  }

  encodeText(text: string, images: readonly RGBImage[]): EncodedText {
    if (images.length > 0) {
      throw new VagenError(`${images.length} image(s) given to qwen3, a text-only model family`, "send text only to this model, or use a vision-language model (qwen2_5_vl)");
    }
    return { tokenIds: this.tokenizer.encode(text), images: [] };
  }

  decode(ids: readonly number[]): string {
    // An empty generation (an abort) is empty text; the tokenizers library refuses [] outright.
    if (ids.length === 0) return "";
    return this.tokenizer.decode(ids, { skipSpecialTokens: true });
  }
}
