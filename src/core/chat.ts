/**
 * The chat message every layer above the models speaks: harnesses build them, clients
 * send them, the engine turns them into prompts and `vagen serve` parses them from
 * requests. Images travel as RGB pixels, not URLs, so an in-process engine feeds them to
 * the vision tower without a PNG round trip; only an HTTP client encodes them.
 *
 * A chat template sees a different shape (`TemplateMessage` in src/models/chat-template.ts:
 * transformers' JSON with image markers instead of pixels); a family's prompt builder
 * converts one to the other.
 */
import type { RGBImage } from "./image.ts";

export type Role = "system" | "user" | "assistant";

export type ContentPart = { type: "text"; text: string } | { type: "image"; image: RGBImage };

export interface ChatMessage {
  role: Role;
  content: ContentPart[];
}

export function textPart(text: string): ContentPart {
  return { type: "text", text };
}

export function imagePart(image: RGBImage): ContentPart {
  return { type: "image", image };
}

/**
 * The message with only its images when it has any; a message without images comes back
 * as it is. For policies that read the board from the picture: an env's words around an
 * image ("the extracted valid action is ['down']") repeat what the picture shows, and
 * let a small policy copy the last move instead of looking.
 */
export function imagesOnly(message: ChatMessage): ChatMessage {
  if (!message.content.some((p) => p.type === "image")) return message;
  return { ...message, content: message.content.filter((p) => p.type === "image") };
}

/** The message's text parts joined, images left out. */
export function messageText(message: ChatMessage): string {
  return message.content.map((p) => (p.type === "text" ? p.text : "")).join("");
}

/**
 * VAGEN's chat-template keyword arguments (vagen_multiturn.yaml's
 * data.apply_chat_template_kwargs): Qwen3's thinking mode off; templates that do not read
 * the variable ignore it. The default of `vagen train`'s and `vagen sft`'s key.
 */
export const VAGEN_CHAT_TEMPLATE_KWARGS: Readonly<Record<string, unknown>> = { enable_thinking: false };
