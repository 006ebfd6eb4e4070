/**
 * An episode's token-level conversations (VAGEN main's conversation record, kept by the
 * harness instead of guessed by the client).
 *
 * The loop hands over each turn's full message list. When the conversation open now was
 * sent exactly the messages this list starts with, followed by its own reply (the same
 * message objects: the loop reuses them, nothing is compared by content), only the
 * messages after them are appended and the model continues its session; otherwise the
 * open conversation is closed and a fresh one starts with the whole list. Concat keeps
 * one conversation per episode; no_concat and compact open one per model call.
 *
 * Before each generation the row's response budget decides the room left
 * (generation-limit.ts) and the model's context must still hold the prompt; after it,
 * a reply that holds vision ids makes the episode unusable and an empty reply ends it.
 * A seeded episode samples each call with its own seed, derived from the episode's and
 * the call's number (as VAGEN derives one per call), so turns do not replay the same
 * random draws.
 */
import type { ClientConversation, Completion, InferenceClient, SamplingParams } from "../clients/types.ts";
import { blake2b } from "../core/blake2b.ts";
import type { ChatMessage } from "../core/chat.ts";
import { generationFloor, generationLimit } from "./generation-limit.ts";
import type { EpisodeConversation, RowLimits, SummaryPolicy, UnusableReason } from "./types.ts";

/** What one model call came to. */
export type TokenCall =
  | {
      kind: "reply";
      completion: Completion;
      /** The reply as the assistant message later turns include (this very object). */
      assistant: ChatMessage;
      /** Where the reply sits in the episode's conversations (token-level calls only). */
      at?: { conversation: number; reply: number };
    }
  | { kind: "stop"; reason: "no_room" | "empty_generation" | "unusable"; unusable?: UnusableReason };

interface OpenConversation {
  conversation: ClientConversation;
  ordinal: number;
  /** The messages it holds, in order (replies as the assistant objects handed out). */
  sent: ChatMessage[];
  replies: number;
  /** Tokens the last continuing call added (its new messages, generation prompt and reply). */
  lastTurnCost: number;
  endsWithSummary: boolean;
}

export class TokenConversations {
  private open: OpenConversation | undefined;
  private readonly closed: EpisodeConversation[] = [];
  private opened = 0;
  /** The last summarised conversation held at most one turn. */
  private lastSummaryWasShort = false;
  /** Model calls made so far (replies and summaries). */
  private calls = 0;

  constructor(
    private readonly client: InferenceClient,
    private readonly limits: RowLimits = {},
  ) {}

  async send(messages: readonly ChatMessage[], sampling: SamplingParams, signal?: AbortSignal): Promise<TokenCall> {
    const lengthBefore = this.open?.conversation.length ?? 0;
    const open = this.route(messages);
    const { conversation } = open;
    const continuing = open.replies > 0;
    if (!continuing && this.limits.maxPromptLength !== undefined && conversation.length > this.limits.maxPromptLength) {
      return { kind: "stop", reason: "unusable", unusable: "context_too_large" };
    }
    // The model's own context: an opening that cannot fit is unusable (VAGEN's
    // ContextTooLarge); a continuation that no longer fits ends the episode where it is.
    const contextLimit = conversation.contextLimit;
    if (contextLimit !== undefined && conversation.length + conversation.measure([], { replyPrompt: true }) >= contextLimit) {
      return continuing ? { kind: "stop", reason: "no_room" } : { kind: "stop", reason: "unusable", unusable: "context_too_large" };
    }
    let maxTokens = sampling.maxTokens;
    const budget = this.limits.maxResponseLength;
    if (budget !== undefined) {
      // The pending observation is already appended, so it counts in responseLength; a
      // continuing call's generation prompt falls in the response region too, so a reply
      // that fits its room is never cut by the row's budget.
      const header = continuing ? conversation.measure([], { replyPrompt: true }) : 0;
      const room = generationLimit(budget, generationFloor(budget, sampling.maxTokens), conversation.responseLength + header);
      if (room === 0) return { kind: "stop", reason: "no_room" };
      maxTokens = Math.min(maxTokens ?? room, room);
    }
    const completion = await conversation.reply(this.callSampling({ ...sampling, maxTokens }), { signal });
    if (continuing) open.lastTurnCost = conversation.length - lengthBefore;
    const at = { conversation: open.ordinal, reply: open.replies++ };
    const assistant: ChatMessage = { role: "assistant", content: [{ type: "text", text: completion.text }] };
    open.sent.push(assistant);
    const ids = completion.tokenIds ?? [];
    if (ids.some((id) => conversation.isVisionToken(id))) return { kind: "stop", reason: "unusable", unusable: "sampled_vision_token" };
    if (ids.length === 0) return { kind: "stop", reason: "empty_generation" };
    return { kind: "reply", completion, assistant, at };
  }

  /**
   * Whether to summarise before sending `messages` (VAGEN main's compact), and with how
   * many tokens: never on a conversation's opening call; otherwise when the row's
   * response budget, after the pending messages with their generation prompt and the
   * room a summary needs (its request, generation prompt and budget), leaves no room
   * for a generation, or when the conversation's
   * tokens plus the last turn's cost reach `compactBudget`.
   */
  summaryBudget(messages: readonly ChatMessage[], policy: SummaryPolicy, sampling: SamplingParams): number | undefined {
    const open = this.open;
    if (!open || open.replies === 0 || !startsWith(messages, open.sent)) return undefined;
    const budget = this.limits.maxResponseLength;
    const scale = policy.compactBudget ?? budget;
    if (scale === undefined) return undefined;
    const { conversation } = open;
    const summaryBudget = policy.summaryBudget ?? Math.max(1, Math.min(sampling.maxTokens ?? scale, Math.floor(scale / 4)));
    let due = policy.compactBudget !== undefined && conversation.length + open.lastTurnCost >= policy.compactBudget;
    if (!due && budget !== undefined) {
      const pending = conversation.measure(messages.slice(open.sent.length), { replyPrompt: true });
      // The summary needs its request, the generation prompt after it, and its own budget.
      const reserve = summaryBudget + conversation.measure([policy.request], { replyPrompt: true });
      due = generationLimit(budget, generationFloor(budget, sampling.maxTokens), conversation.responseLength, pending, reserve) === 0;
    }
    return due ? summaryBudget : undefined;
  }

  /**
   * Ask for the summary in the open conversation (its tokens are sampled, so trained),
   * then close that conversation as summarised. Two summarised conversations in a row
   * of at most one turn each make the episode unusable: compaction is not making room.
   */
  async summarize(request: ChatMessage, sampling: SamplingParams, signal?: AbortSignal): Promise<{ kind: "summary"; text: string; conversation: number } | Extract<TokenCall, { kind: "stop" }>> {
    const open = this.open;
    if (!open) throw new Error("summarize() needs an open conversation");
    const turns = open.replies;
    if (turns <= 1 && this.lastSummaryWasShort) return { kind: "stop", reason: "unusable", unusable: "compaction_no_progress" };
    open.conversation.addMessages([request]);
    open.sent.push(request);
    const completion = await open.conversation.reply(this.callSampling(sampling), { signal });
    open.replies++;
    const ids = completion.tokenIds ?? [];
    if (ids.some((id) => open.conversation.isVisionToken(id))) return { kind: "stop", reason: "unusable", unusable: "sampled_vision_token" };
    this.lastSummaryWasShort = turns <= 1;
    open.endsWithSummary = true;
    this.closeOpen();
    return { kind: "summary", text: completion.text, conversation: open.ordinal };
  }

  /** Release every conversation and return their records, in the order opened (idempotent). */
  close(): EpisodeConversation[] {
    this.closeOpen();
    return this.closed;
  }

  private callSampling(sampling: SamplingParams): SamplingParams {
    const call = this.calls++;
    return sampling.seed === undefined ? sampling : { ...sampling, seed: callSeed(sampling.seed, call) };
  }

  /** The open conversation continued with the new messages, or a fresh one holding them all. */
  private route(messages: readonly ChatMessage[]): OpenConversation {
    const open = this.open;
    if (open && open.replies > 0 && startsWith(messages, open.sent)) {
      const fresh = messages.slice(open.sent.length);
      open.conversation.addMessages(fresh);
      open.sent.push(...fresh);
      return open;
    }
    this.closeOpen();
    const conversation = this.client.openConversation!();
    const next: OpenConversation = { conversation, ordinal: this.opened++, sent: [...messages], replies: 0, lastTurnCost: 0, endsWithSummary: false };
    conversation.addMessages(messages);
    this.open = next;
    return next;
  }

  private closeOpen(): void {
    const open = this.open;
    if (!open) return;
    this.open = undefined;
    open.conversation.release();
    this.closed.push({ ordinal: open.ordinal, record: open.conversation.record(), endsWithSummary: open.endsWithSummary });
  }
}

/** A 31-bit seed for call `call` of an episode seeded with `seed`. */
export function callSeed(seed: number, call: number): number {
  const digest = blake2b(new TextEncoder().encode(`${seed}:${call}`), 4);
  return new DataView(digest.buffer, digest.byteOffset, 4).getUint32(0) & 0x7fffffff;
}

function startsWith(messages: readonly ChatMessage[], prefix: readonly ChatMessage[]): boolean {
  return prefix.length <= messages.length && prefix.every((m, i) => messages[i] === m);
}
