/**
 * Chat templates: the Jinja template a model directory ships (tokenizer_config.json's
 * `chat_template`, chat_template.json, or chat_template.jinja, in the order transformers
 * prefers them), rendered with @huggingface/jinja.
 *
 * Messages follow the transformers convention: `content` is a string or a list of parts
 * `{type: "text", text}` / `{type: "image"}`. Templates only place image markers; the
 * family's processor expands them to the right number of image tokens.
 */
import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { Template } from "@huggingface/jinja";
import { VagenError } from "../errors.ts";
import { readJson } from "./tokenizer.ts";

export type ChatRole = "system" | "user" | "assistant" | "tool";

export type ChatContentPart = { type: "text"; text: string } | { type: "image" };

export interface ChatMessage {
  role: ChatRole;
  content: string | ChatContentPart[];
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

  render(messages: readonly ChatMessage[], opts: RenderOptions = {}): string {
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
export function countImages(messages: readonly ChatMessage[]): number {
  let n = 0;
  for (const m of messages) if (Array.isArray(m.content)) for (const p of m.content) if (p.type === "image") n++;
  return n;
}
