/**
 * A conversation kept as the tokens the model actually saw and sampled.
 *
 * It holds token ids, a loss mask (1 = a token the model sampled), each sampled token's
 * log-probability, its turns (where each message's tokens start and end) and its image
 * spans (where each image's placeholder tokens sit, with the image, its content key and
 * patch grid). It grows only at the end:
 *
 * - `addMessage` tokenizes just the new message, framed the way the chat template frames
 *   it (the framing is found by rendering, see chat-framing.ts); mask 0.
 * - `beginReply` appends the template's generation prompt (`<|im_start|>assistant\n` for
 *   Qwen); mask 0. It returns what an engine needs to continue the conversation.
 * - `addReply` appends the sampled ids verbatim, with their log-probs; mask 1. Then the
 *   template's closing after a reply (`<|im_end|>\n` for Qwen), mask 0, by this rule:
 *   when the reply's last id is the closing's first (the model sampled the end-of-turn
 *   token), that id stays a sampled token (mask 1) and only the rest of the closing is
 *   appended; otherwise (generation stopped by length, a stop string, another end-of-text
 *   id, or an abort) the whole closing is appended, so the next turn still starts on a
 *   well-formed boundary. Where the template writes nothing after a reply (GLM-4V: the
 *   next `<|user|>` ends the turn, and the model stops by sampling it), a reply whose
 *   last id is the next message's opening token keeps it as a sampled token, and that
 *   message is appended without it.
 *
 * Earlier turns are never re-rendered or re-tokenized, so a training row's reply tokens
 * are exactly the sampled ones even where decoding and re-encoding the text would give
 * other ids. The template must be prefix-stable for this (checked on every append).
 *
 * Family-independent: a family supplies a `ConversationCodec` (its tokenizer and image
 * placeholder expansion behind one method).
 */
import type { ChatMessage, Role } from "../core/chat.ts";
import { VagenError } from "../core/errors.ts";
import type { RGBImage } from "../core/image.ts";
import type { ChatFraming } from "./chat-framing.ts";
import { toTemplateMessages, type TemplateMessage } from "./chat-template.ts";
import { imageKey } from "./image-key.ts";

/** Where one image's placeholder tokens sit in the conversation. */
export interface ConversationImage {
  /** Index of the image's first placeholder token. */
  offset: number;
  /** Number of placeholder tokens (for Qwen2.5-VL: the merged-patch count). */
  length: number;
  image: RGBImage;
  /** Content key of the pixels (image-key.ts), so caches can tell images apart. */
  key: string;
  /** The image's patch grid as the family's processor computed it (Qwen: [t, h, w]). */
  grid: readonly number[];
}

/** Text encoded with its images' placeholders expanded; offsets relative to `tokenIds`. */
export interface EncodedText {
  tokenIds: number[];
  images: { offset: number; length: number; grid: readonly number[] }[];
}

/** What a model family gives a conversation: the template's framing and its tokenizer. */
export interface ConversationCodec {
  readonly framing: ChatFraming;
  /**
   * Token ids of rendered chat text in which each image appears as the template's single
   * marker (one per entry of `images`, in order), markers expanded to placeholder tokens.
   */
  encodeText(text: string, images: readonly RGBImage[]): EncodedText;
  /** Generated ids as the text an assistant message holds (special tokens skipped). */
  decode(ids: readonly number[]): string;
}

/** One generation, as an engine returns it. */
export interface SampledReply {
  /** Sampled ids, exactly as generated (an end-of-turn id included). */
  tokenIds: readonly number[];
  /** The sampling log-probability of each id; absent when the backend gives none. */
  logprobs?: readonly number[];
  /** Why generation ended ("stop", "length", ...), kept on the turn for the record. */
  finishReason?: string;
}

export interface TokenSpan {
  start: number;
  end: number;
}

export interface ConversationTurn {
  role: Role;
  /** [start, end) of all the turn's tokens: framing, content and closing. */
  start: number;
  end: number;
  /** A sampled reply's own tokens (mask 1) within the turn. */
  sampled?: TokenSpan;
  finishReason?: string;
}

/** What an engine needs to continue the conversation. */
export interface ConversationPrompt {
  tokenIds: number[];
  images: ConversationImage[];
}

/** What a rollout turns into training rows. Arrays are copies, aligned with `tokenIds`. */
export interface ConversationRecord {
  tokenIds: number[];
  /** 1 where the model sampled the token, 0 for template, message and image tokens. */
  lossMask: number[];
  /** The sampling log-prob of each sampled token; 0 elsewhere (and where none was given). */
  logprobs: number[];
  /** False when some reply came without log-probs. */
  logprobsComplete: boolean;
  /** Tokens before the first sampled one (all of them when nothing was sampled). */
  promptLength: number;
  /** Each reply's sampled tokens, in order; a turn's reward goes on its span's last token. */
  replySpans: TokenSpan[];
  turns: ConversationTurn[];
  images: ConversationImage[];
}

export class Conversation {
  private readonly ids: number[] = [];
  private readonly mask: number[] = [];
  private readonly sampledLogprobs: number[] = [];
  private readonly imageSpans: ConversationImage[] = [];
  private readonly turnList: ConversationTurn[] = [];
  /** The messages so far as the template sees them: only used to find the next framing. */
  private readonly history: TemplateMessage[] = [];
  /** Start of the reply turn `beginReply` opened and `addReply` has not closed. */
  private openReplyStart: number | undefined;
  /**
   * The last id of a reply after which the template writes nothing: it may be the next
   * message's opening token, sampled as the stop (GLM-4V's `<|user|>`), and is then not
   * appended twice.
   */
  private replyStopId: number | undefined;
  private logprobsComplete = true;

  constructor(private readonly codec: ConversationCodec) {}

  get length(): number {
    return this.ids.length;
  }

  get tokenIds(): readonly number[] {
    return this.ids;
  }

  get lossMask(): readonly number[] {
    return this.mask;
  }

  get logprobs(): readonly number[] {
    return this.sampledLogprobs;
  }

  get images(): readonly ConversationImage[] {
    return this.imageSpans;
  }

  get turns(): readonly ConversationTurn[] {
    return this.turnList;
  }

  /** True between `beginReply` and `addReply`. */
  get awaitingReply(): boolean {
    return this.openReplyStart !== undefined;
  }

  /**
   * Append a message that the model did not sample (system, user, or an assistant message
   * written by someone else): its tokens with the template's framing, mask 0.
   */
  addMessage(message: ChatMessage): ConversationTurn {
    this.refuseWhileAwaitingReply("add a message");
    const { messages, images } = toTemplateMessages([message]);
    const templateMessage = messages[0]!;
    const start = this.ids.length;
    this.appendText(this.codec.framing.messageText(this.history, templateMessage), images, this.takeReplyStop());
    this.history.push(templateMessage);
    return this.pushTurn({ role: message.role, start, end: this.ids.length });
  }

  /** Append the generation prompt (mask 0) and return the prompt an engine continues. */
  beginReply(): ConversationPrompt {
    this.refuseWhileAwaitingReply("begin another reply");
    this.openReplyStart = this.ids.length;
    this.appendText(this.codec.framing.generationPromptText(this.history), [], this.takeReplyStop());
    return this.prompt();
  }

  /** Append a sampled reply verbatim (mask 1) and the template's closing (see the module doc). */
  addReply(reply: SampledReply): ConversationTurn {
    const start = this.openReplyStart;
    if (start === undefined) throw new VagenError("conversation: addReply() needs beginReply() first (the generation prompt comes before a reply)");
    const { tokenIds, logprobs } = reply;
    if (logprobs !== undefined && logprobs.length !== tokenIds.length) {
      throw new VagenError(`conversation: the reply has ${tokenIds.length} token id(s) but ${logprobs.length} log-prob(s); expected one log-prob per id`);
    }
    if (logprobs === undefined && tokenIds.length > 0) this.logprobsComplete = false;
    const sampledStart = this.ids.length;
    tokenIds.forEach((id, i) => this.push(id, 1, logprobs?.[i] ?? 0));
    const sampled = { start: sampledStart, end: this.ids.length };

    const closing = this.codec.encodeText(this.codec.framing.replyClosingText(this.history), []).tokenIds;
    this.replyStopId = closing.length === 0 ? tokenIds[tokenIds.length - 1] : undefined;
    const sampledEndOfTurn = tokenIds.length > 0 && tokenIds[tokenIds.length - 1] === closing[0];
    for (const id of closing.slice(sampledEndOfTurn ? 1 : 0)) this.push(id, 0, 0);

    this.history.push({ role: "assistant", content: this.codec.decode(tokenIds) });
    this.openReplyStart = undefined;
    return this.pushTurn({ role: "assistant", start, end: this.ids.length, sampled, finishReason: reply.finishReason });
  }

  /**
   * The id that ends an assistant turn here: the first token of the template's closing
   * after a reply (`<|im_end|>` for Qwen), the one a model samples to stop. A reply
   * written by someone else (a demonstration) ends with it, so imitation learns to stop;
   * `addReply` then keeps it as the reply's last token, as it does for a sampled one.
   */
  endOfTurnId(): number {
    const closing = this.codec.encodeText(this.codec.framing.replyClosingText(this.history), []).tokenIds;
    if (closing.length > 0) return closing[0]!;
    // Nothing after a reply: the turn ends where the next user message opens (GLM-4V's <|user|>).
    const afterReply = [...this.history, { role: "assistant", content: "." } as TemplateMessage];
    const opening = this.codec.encodeText(this.codec.framing.messageText(afterReply, { role: "user", content: "." } as TemplateMessage), []).tokenIds;
    if (opening.length === 0) {
      throw new VagenError(`${this.codec.framing.template.origin}: the chat template writes nothing after an assistant reply nor before a user message, so no token ends a turn`);
    }
    return opening[0]!;
  }

  /** The ids and image spans so far (copies): what an engine prefills or continues. */
  prompt(): ConversationPrompt {
    return { tokenIds: [...this.ids], images: this.imageSpans.map((s) => ({ ...s })) };
  }

  /** Everything a rollout needs to build rows, as copies. */
  record(): ConversationRecord {
    const replySpans = this.turnList.flatMap((t) => (t.sampled ? [{ ...t.sampled }] : []));
    return {
      tokenIds: [...this.ids],
      lossMask: [...this.mask],
      logprobs: [...this.sampledLogprobs],
      logprobsComplete: this.logprobsComplete,
      promptLength: replySpans[0]?.start ?? this.ids.length,
      replySpans,
      turns: this.turnList.map((t) => ({ ...t, sampled: t.sampled && { ...t.sampled } })),
      images: this.imageSpans.map((s) => ({ ...s })),
    };
  }

  /** The previous reply's stop id, for the next append only. */
  private takeReplyStop(): number | undefined {
    const id = this.replyStopId;
    this.replyStopId = undefined;
    return id;
  }

  /** Appends encoded text (mask 0); a first id equal to `alreadyThere` (the reply's sampled stop) is not appended again. */
  private appendText(text: string, images: readonly RGBImage[], alreadyThere?: number): void {
    const encoded = this.codec.encodeText(text, images);
    if (encoded.images.length !== images.length) {
      throw new VagenError(`conversation: the message carries ${images.length} image(s) but its encoding placed ${encoded.images.length}`);
    }
    if (alreadyThere !== undefined && encoded.tokenIds[0] === alreadyThere && encoded.images.every((span) => span.offset > 0)) {
      encoded.tokenIds.shift();
      for (const span of encoded.images) span.offset -= 1;
    }
    const base = this.ids.length;
    encoded.images.forEach((span, i) => {
      const image = images[i]!;
      this.imageSpans.push({ offset: base + span.offset, length: span.length, image, key: imageKey(image), grid: span.grid });
    });
    for (const id of encoded.tokenIds) this.push(id, 0, 0);
  }

  private push(id: number, mask: 0 | 1, logprob: number): void {
    this.ids.push(id);
    this.mask.push(mask);
    this.sampledLogprobs.push(logprob);
  }

  private pushTurn(turn: ConversationTurn): ConversationTurn {
    this.turnList.push(turn);
    return { ...turn };
  }

  private refuseWhileAwaitingReply(what: string): void {
    if (this.openReplyStart !== undefined) {
      throw new VagenError(`conversation: cannot ${what} while a reply is awaited; call addReply() with the generation first`);
    }
  }
}
