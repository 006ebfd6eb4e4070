/**
 * A text-only family's chat template. Templates of text models (Qwen3, LLaMA) read a
 * message's `content` as a string: given transformers' list of parts they render nothing
 * for it (Qwen3's writes '' when content is not a string). So each message's text parts
 * are joined into one string before rendering, as a transformers user passes text to
 * such a model, and an image part is refused: a text model has no place for it, and
 * dropping it silently would answer a question about a picture nobody showed it.
 */
import { VagenError } from "../core/errors.ts";
import { ChatTemplate, type RenderOptions, type TemplateMessage } from "./chat-template.ts";

export class TextChatTemplate extends ChatTemplate {
  constructor(
    source: string,
    origin: string,
    /** The family's name, for the error an image gets. */
    readonly family: string,
  ) {
    super(source, origin);
  }

  /** The model directory's template (ChatTemplate.fromDir's search), for a text family. */
  static fromDirForText(dir: string, family: string): TextChatTemplate {
    const found = ChatTemplate.fromDir(dir);
    return new TextChatTemplate(found.source, found.origin, family);
  }

  override render(messages: readonly TemplateMessage[], opts: RenderOptions = {}): string {
    return super.render(textOnlyMessages(messages, this.family), opts);
  }
}

/** Messages with string content (text parts joined); throws on an image part. */
export function textOnlyMessages(messages: readonly TemplateMessage[], family: string): TemplateMessage[] {
  return messages.map((m, i) => {
    if (typeof m.content === "string") return m;
    const text = m.content.map((p) => {
      if (p.type === "image") {
        throw new VagenError(
          `message ${i + 1} (${m.role}) holds an image, but ${family} is a text-only model family`,
          "send text only to this model, or use a vision-language model (qwen2_5_vl)",
        );
      }
      return p.text;
    });
    return { role: m.role, content: text.join("") };
  });
}
