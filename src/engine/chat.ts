/**
 * From chat messages to engine prompts: the family-specific part (chat template, image
 * placeholders) behind one small interface, so the in-process client and the HTTP server
 * stay family-independent.
 */
import type { ChatMessage } from "../core/chat.ts";
import type { Prompt } from "./types.ts";

export interface ChatPromptBuilder {
  /** The name clients use for the model (`model` in the OpenAI API). */
  readonly modelName: string;
  /** Ids that end an assistant turn. */
  readonly eosTokenIds: readonly number[];
  /** Render the conversation (ending with the assistant header) and tokenize it, images included. */
  buildPrompt(messages: readonly ChatMessage[]): Prompt;
  /** Generated ids to text, special tokens skipped. */
  decode(ids: readonly number[]): string;
  /**
   * The raw bytes one id contributes to `decode`'s text (a byte-level BPE token may end
   * inside a UTF-8 character, so decoding it alone cannot give them); absent when the
   * tokenizer cannot say.
   */
  readonly tokenBytes?: (id: number) => Uint8Array;
}
