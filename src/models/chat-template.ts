/**
 * Chat templates: the Jinja template a model directory ships (tokenizer_config.json's
 * `chat_template`, chat_template.json, or chat_template.jinja, in the order transformers
 * prefers them), rendered with @huggingface/jinja.
 *
 * Messages follow the transformers convention: `content` is a string or a list of parts
 * `{type: "text", text}` / `{type: "image"}`. Templates only place image markers; the
 * family's processor expands them to the right number of image tokens. That shape
 * (`TemplateMessage`) is the template's input only; everything above the models speaks
 * `ChatMessage` (src/core/chat.ts, pixels inline), and `toTemplateMessages` converts.
 */
import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { Template } from "@huggingface/jinja";
import type { ChatMessage } from "../core/chat.ts";
import { VagenError } from "../core/errors.ts";
import type { RGBImage } from "../core/image.ts";
import { readJson } from "./tokenizer.ts";

export type TemplateRole = "system" | "user" | "assistant" | "tool";

/** A content part as chat templates see it: text, or a marker where an image goes. */
export type TemplateContentPart = { type: "text"; text: string } | { type: "image" };

/** A message in transformers' convention, the input of `ChatTemplate.render`. */
export interface TemplateMessage {
  role: TemplateRole;
  content: string | TemplateContentPart[];
}

/**
 * Chat messages as the template sees them: each image part becomes a marker, and the
 * images come back apart, in order (pixels never go through the template engine).
 */
export function toTemplateMessages(messages: readonly ChatMessage[]): { messages: TemplateMessage[]; images: RGBImage[] } {
  const images: RGBImage[] = [];
  const converted = messages.map((m) => ({
    role: m.role,
    content: m.content.map((p): TemplateContentPart => {
      if (p.type === "text") return { type: "text", text: p.text };
      images.push(p.image);
      return { type: "image" };
    }),
  }));
  return { messages: converted, images };
}

export interface RenderOptions {
  /** End with the assistant header so the model writes the next turn. */
  addGenerationPrompt?: boolean;
  /** Extra template variables (bos_token, add_vision_id, tools, ...). */
  variables?: Record<string, unknown>;
}

export class ChatTemplate {
  private readonly template: Template;

  constructor(
    readonly source: string,
    /** Where it came from, for error messages. */
    readonly origin = "chat template",
  ) {
    try {
      this.template = new Template(source);
    } catch (e) {
      throw new VagenError(`${origin}: the chat template does not parse (${(e as Error).message})`);
    }
  }

  /** Find the template in a model directory. */
  static fromDir(dir: string): ChatTemplate {
    const jinjaPath = join(dir, "chat_template.jinja");
    if (existsSync(jinjaPath)) return new ChatTemplate(readFileSync(jinjaPath, "utf8"), jinjaPath);
    const jsonPath = join(dir, "chat_template.json");
    if (existsSync(jsonPath)) {
      const t = readJson(jsonPath).chat_template;
      if (typeof t === "string") return new ChatTemplate(t, jsonPath);
    }
    const cfgPath = join(dir, "tokenizer_config.json");
    if (existsSync(cfgPath)) {
      const t = readJson(cfgPath).chat_template;
      if (typeof t === "string") return new ChatTemplate(t, cfgPath);
      if (Array.isArray(t)) {
        // A list of named templates: transformers uses the one called "default".
        const named = t.find((e) => (e as { name?: string }).name === "default") as { template?: string } | undefined;
        if (named?.template) return new ChatTemplate(named.template, `${cfgPath} (chat_template "default")`);
      }
    }
    throw new VagenError(
      `${dir}: no chat template found`,
      "expected chat_template.jinja, chat_template.json, or a chat_template key in tokenizer_config.json",
    );
  }

  render(messages: readonly TemplateMessage[], opts: RenderOptions = {}): string {
    try {
      return this.template.render({
        messages,
        add_generation_prompt: opts.addGenerationPrompt ?? false,
        ...opts.variables,
      });
    } catch (e) {
      throw new VagenError(`${this.origin}: rendering failed (${(e as Error).message})`);
    }
  }
}

/** Number of image parts in a message list (what the template will mark). */
export function countImages(messages: readonly TemplateMessage[]): number {
  let n = 0;
  for (const m of messages) if (Array.isArray(m.content)) for (const p of m.content) if (p.type === "image") n++;
  return n;
}
