/**
 * One episode's token-level conversations into training rows (VAGEN main section 4.6).
 *
 * Every conversation that holds at least one sampled token is a row, in the order the
 * conversations were opened: under concat that is the whole episode, under no_concat
 * and compact one row per model call. The row is the conversation cut where the first
 * sampled token starts: before it the prompt, from it on the response, whose mask-1
 * tokens are the sampled ids with their log-probs and whose mask-0 tokens are the
 * observations and template tokens between replies.
 *
 * Rewards go where the env placed them: a turn's reward on the last token of the
 * reply that earned it, or, when the env's step info carries `token_rewards` (one
 * number per sampled token of that reply), on each token. Scores from outside the env
 * (world-model rewards, src/rewards) come as `TurnScores`, one per turn, and are added
 * on the reply's tokens on top. A reply with no tokens drops its reward; mask-0 tokens
 * never carry one.
 *
 * Anchor states (GiGPO's step groups): each trained reply span gets the key of the state
 * the model answered, the env's `state_key` from the info before the turn (reset's info
 * for the first) when it gives one, else a hash of the observation's text and images;
 * a summary span is keyed "summary".
 *
 * Budgets: a prompt longer than `maxPromptLength` makes the episode unusable (VAGEN
 * raises; here the episode is dropped and counted). A response longer than
 * `maxResponseLength` keeps its head, cut before an image block rather than through
 * it; a reply whose tokens cross the cut is dropped entirely (its kept tokens become
 * mask 0 with no log-prob and no reward), and the row is marked truncated.
 */
import type { EpisodeConversation, EpisodeRecord, TurnRecord } from "../harness/types.ts";
import { reportedSuccess } from "../harness/observation.ts";
import { blake2b } from "../core/blake2b.ts";
import { VagenError } from "../core/errors.ts";
import { imageKey } from "../models/image-key.ts";
import type { TokenSpan } from "../models/conversation.ts";
import type { RowImage, RowTruncation, TrainingRow } from "./types.ts";

/** Who an episode is: the columns every row of it repeats. */
export interface EpisodeIdentity {
  uid: string;
  episodeId: string;
  trajIndex: number;
  env: string;
  seed: number;
}

export interface RowBudgets {
  maxPromptLength?: number;
  maxResponseLength?: number;
}

/** Why an episode gave no rows. */
export type DropReason = "context_too_large" | "sampled_vision_token" | "compaction_no_progress" | "model_error" | "env_error" | "no_sampled_tokens";

/**
 * What a turn earned beyond the env's reward (world-model section scores): per sampled
 * token of the turn's reply, added where they sit, and named parts for metrics.
 */
export interface TurnScores {
  tokenRewards: readonly number[];
  parts?: Readonly<Record<string, number>>;
}

export type EpisodeRows = { rows: TrainingRow[]; dropped?: undefined } | { rows: []; dropped: DropReason; detail?: string };

/** `turnScores[i]`, when given, is what `episode.turns[i]` earned beyond the env's reward. */
export function rowsFromEpisode(episode: EpisodeRecord, identity: EpisodeIdentity, budgets: RowBudgets = {}, turnScores?: readonly (TurnScores | undefined)[]): EpisodeRows {
  if (episode.finishReason === "unusable") return { rows: [], dropped: episode.unusable ?? "context_too_large" };
  if (episode.finishReason === "model_error" || episode.finishReason === "env_error") {
    return { rows: [], dropped: episode.finishReason, detail: episode.error?.message };
  }
  if (episode.conversations === undefined) {
    throw new VagenError(
      `episode ${identity.episodeId}: no token-level conversations were recorded`,
      "training rows need a client that keeps token-level conversations (the in-process engine), not a message-level one",
    );
  }
  const trainable = episode.conversations.filter((c) => c.record.replySpans.some((s) => s.end > s.start));
  if (trainable.length === 0) return { rows: [], dropped: "no_sampled_tokens" };

  const lastTurnInfo = episode.turns[episode.turns.length - 1]?.info;
  const success = reportedSuccess(lastTurnInfo) === true;
  const rows: TrainingRow[] = [];
  for (const conversation of trainable) {
    const turns = episode.turns.flatMap((turn, i) => (turn.call?.conversation === conversation.ordinal ? [{ turn, scores: turnScores?.[i] }] : []));
    const row = conversationRow(conversation, turns, budgets, (turn) => anchorKey(episode, turn));
    if ("tooLong" in row) return { rows: [], dropped: "context_too_large", detail: row.tooLong };
    rows.push({
      ...identity,
      turnIndex: conversation.ordinal,
      ...row,
      episodeReward: episode.totalReward,
      success,
      episodeTurns: episode.turns.length,
      lastTurn: false,
      endsWithSummary: conversation.endsWithSummary,
    });
  }
  rows[rows.length - 1]!.lastTurn = true;
  return { rows };
}

type RowBody = Pick<
  TrainingRow,
  "promptIds" | "responseIds" | "responseMask" | "rolloutLogprobs" | "logprobsComplete" | "tokenRewards" | "responseSpans" | "images" | "truncation" | "stateKeys" | "rewardParts"
>;

function conversationRow(
  conversation: EpisodeConversation,
  turns: readonly { turn: TurnRecord; scores?: TurnScores }[],
  budgets: RowBudgets,
  stateKeyOf: (turn: TurnRecord) => string,
): RowBody | { tooLong: string } {
  const { record } = conversation;
  const P = record.promptLength;
  if (budgets.maxPromptLength !== undefined && P > budgets.maxPromptLength) {
    return { tooLong: `conversation ${conversation.ordinal}: a prompt of ${P} tokens is over max_prompt_length ${budgets.maxPromptLength}` };
  }
  const scores = new Array<number>(record.tokenIds.length).fill(0);
  const rewardParts: Record<string, number> = {};
  /** Reply index -> anchor key; replies of no env turn are summaries. */
  const replyKeys = new Map<number, string>();
  for (const { turn, scores: extra } of turns) {
    const span = record.replySpans[turn.call!.reply];
    if (span === undefined) throw new VagenError(`turn ${turn.index}: reply ${turn.call!.reply} is not in conversation ${conversation.ordinal}'s record`);
    placeReward(scores, span, turn);
    rewardParts.env = (rewardParts.env ?? 0) + turn.reward;
    addRewardParts(rewardParts, turn.info.reward_parts);
    if (extra) {
      addTokenRewards(scores, span, extra.tokenRewards, `turn ${turn.index}'s scores`);
      addRewardParts(rewardParts, extra.parts);
    }
    replyKeys.set(turn.call!.reply, stateKeyOf(turn));
  }

  // Response coordinates from here on: index j is token P + j of the conversation.
  const fullLength = record.tokenIds.length - P;
  const cut = responseCut(fullLength, budgets.maxResponseLength, record.images, P);
  const mask = record.lossMask.slice(P, P + cut);
  const logprobs = record.logprobs.slice(P, P + cut);
  const rewards = scores.slice(P, P + cut);
  const spans: TokenSpan[] = [];
  const stateKeys: string[] = [];
  for (const [reply, span] of record.replySpans.entries()) {
    const start = span.start - P;
    const end = span.end - P;
    if (end <= cut) {
      if (end > start) {
        spans.push({ start, end });
        stateKeys.push(replyKeys.get(reply) ?? "summary");
      }
      continue;
    }
    // A reply the cut runs through is dropped whole: nothing of it is trained.
    for (let j = start; j < Math.min(end, cut); j++) {
      mask[j] = 0;
      logprobs[j] = 0;
      rewards[j] = 0;
    }
  }
  const kept = P + cut;
  const images: RowImage[] = record.images.filter((img) => img.offset + img.length <= kept).map((img) => ({ offset: img.offset, length: img.length, image: img.image, grid: img.grid }));
  const truncation: RowTruncation = cut < fullLength ? "response_length" : "none";
  return {
    promptIds: record.tokenIds.slice(0, P),
    responseIds: record.tokenIds.slice(P, kept),
    responseMask: mask,
    rolloutLogprobs: logprobs,
    logprobsComplete: record.logprobsComplete,
    tokenRewards: rewards,
    responseSpans: spans,
    images,
    truncation,
    stateKeys,
    rewardParts,
  };
}

/** A turn's reward on its reply: per token when the env gave `token_rewards` of the reply's length, else on the last token. */
function placeReward(scores: number[], span: TokenSpan, turn: TurnRecord): void {
  const length = span.end - span.start;
  if (length === 0) return; // an aborted, empty reply: there is no token to put it on
  const perToken = turn.info.token_rewards;
  if (Array.isArray(perToken) && perToken.every((r) => typeof r === "number")) {
    addTokenRewards(scores, span, perToken, `turn ${turn.index}: info.token_rewards`);
    return;
  }
  scores[span.end - 1]! += turn.reward;
}

/** Add one value per sampled token of `span` (an empty span takes none and drops them). */
function addTokenRewards(scores: number[], span: TokenSpan, values: readonly number[], what: string): void {
  const length = span.end - span.start;
  if (length === 0) return;
  if (values.length !== length) throw new VagenError(`${what} has ${values.length} value(s) but the reply has ${length} sampled token(s); expected one per token`);
  values.forEach((r, i) => (scores[span.start + i]! += r));
}

/** The key of the state `turn` answered (see the module doc). */
function anchorKey(episode: EpisodeRecord, turn: TurnRecord): string {
  const before = turn.index === 1 ? undefined : episode.turns[turn.index - 2];
  const given = (before ? before.info : episode.resetInfo).state_key;
  if (typeof given === "string") return given;
  const obs = before ? before.observation : episode.initialObservation;
  const digest = blake2b(new TextEncoder().encode(JSON.stringify([obs.text, obs.images.map(imageKey)])), 16);
  return `obs:${Buffer.from(digest).toString("hex")}`;
}

function addRewardParts(into: Record<string, number>, parts: unknown): void {
  if (parts === null || typeof parts !== "object") return;
  for (const [name, value] of Object.entries(parts)) if (typeof value === "number") into[name] = (into[name] ?? 0) + value;
}

/**
 * How many response tokens a row keeps: all of them within budget, else the budget's
 * head, moved back to an image's first placeholder when the cut would split its block.
 */
export function responseCut(length: number, budget: number | undefined, images: readonly { offset: number; length: number }[], promptLength: number): number {
  if (budget === undefined || length <= budget) return length;
  let cut = budget;
  for (const img of images) {
    const start = img.offset - promptLength;
    const end = start + img.length;
    if (start < cut && cut < end) cut = Math.max(0, start);
  }
  return cut;
}
