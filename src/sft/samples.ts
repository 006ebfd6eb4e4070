/**
 * Episodes to supervised samples, as token-level conversations (src/models/conversation.ts):
 * each message is framed exactly as the chat template frames it, and each reply is the
 * tokenizer's ids of its text plus the template's end-of-turn token (whatever the
 * family's template closes a reply with), marked as the model's own
 * tokens (loss mask 1). Only those tokens are trained; system prompts, observations,
 * image placeholders and template framing are context (mask 0).
 *
 * The layout follows the harness that will run the policy:
 * - no_concat: one sample per turn, [system, the observation of that turn] -> reply;
 * - observation_only: one sample per turn, [the observation of that turn] -> reply (no
 *   system prompt, and only the observation's images when it has any: for policies
 *   trained from scratch, see src/harness/observation-only.ts);
 * - concat: one sample per episode, the whole conversation with every reply trained;
 * - observation_history: one sample per episode as concat, without the system prompt and
 *   with each observation reduced to its images (src/harness/observation-history.ts).
 */
import { imagesOnly } from "../core/chat.ts";
import { VagenError } from "../core/errors.ts";
import { Conversation, type ConversationCodec, type ConversationRecord } from "../models/conversation.ts";
import type { SampleLayout } from "./config.ts";
import type { Episode } from "./episodes.ts";

export interface ReplyEncoder {
  /** Token ids of a reply's text, without framing. */
  encode(text: string): number[];
}

function addReply(conversation: Conversation, replies: ReplyEncoder, text: string): void {
  conversation.beginReply();
  conversation.addReply({ tokenIds: [...replies.encode(text), conversation.endOfTurnId()] });
}

export function episodeSamples(episode: Episode, layout: SampleLayout, codec: ConversationCodec, replies: ReplyEncoder): ConversationRecord[] {
  if (episode.observations.length < episode.replies.length) {
    throw new VagenError(`${episode.source}: ${episode.replies.length} replies but ${episode.observations.length} observations; every reply needs the observation it answered`);
  }
  if (layout === "no_concat" || layout === "observation_only") {
    return episode.replies.map((reply, t) => {
      const conversation = new Conversation(codec);
      if (layout === "no_concat") conversation.addMessage(episode.system);
      const observation = episode.observations[t]!;
      conversation.addMessage(layout === "observation_only" ? imagesOnly(observation) : observation);
      addReply(conversation, replies, reply);
      return conversation.record();
    });
  }
  if (episode.replies.length === 0) return [];
  const history = layout === "observation_history";
  const conversation = new Conversation(codec);
  if (!history) conversation.addMessage(episode.system);
  episode.replies.forEach((reply, t) => {
    const observation = episode.observations[t]!;
    conversation.addMessage(history ? imagesOnly(observation) : observation);
    addReply(conversation, replies, reply);
  });
  return [conversation.record()];
}
