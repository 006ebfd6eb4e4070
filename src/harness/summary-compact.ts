/**
 * summary_compact: VAGEN main's `compact`. The episode runs as one growing conversation
 * (like concat) until its budget is spent; then, instead of the next observation, the
 * model is asked to summarise the conversation so far, in the same conversation, so the
 * summary's tokens are sampled and trained. A fresh conversation then starts from the
 * system prompt and one user message: the summary, then the pending observation.
 *
 * When to summarise (token-conversations.ts, `summaryBudget`): when the row's response
 * budget, after the pending observation and the room the summary itself needs, leaves no
 * room for a generation; or, with `compact_budget`, once the conversation's tokens plus
 * the last turn's cost reach it. Each conversation is a row that ends with a summary
 * (`endsWithSummary`); the summary ends a turn of its own for the estimators. Without a
 * token-level client (an HTTP model) or any budget, it plays as concat.
 *
 * (The registered `compact` is vagen's text-history harness, compact.ts.)
 */
import * as v from "valibot";
import { validate } from "../config/index.ts";
import type { ChatMessage } from "../core/chat.ts";
import { defineHarness } from "./loop.ts";
import type { EpisodeSummary, Harness } from "./types.ts";

/** VAGEN main's request and reopening text. */
export const SUMMARY_REQUEST = "Summarise the conversation so far. Keep every fact needed to continue.";
export const SUMMARY_PREFIX = "Summary so far: ";

export const SummaryCompactOptions = v.strictObject({
  /** Tokens a summary may take (VAGEN's trainer.compact_summary_budget); default: a quarter of the budget, at most one turn's limit. */
  summary_budget: v.optional(v.pipe(v.number(), v.integer(), v.minValue(1))),
  /** Summarise once a conversation's tokens plus the last turn's cost reach this (VAGEN's compact_budget). */
  compact_budget: v.optional(v.pipe(v.number(), v.integer(), v.minValue(1))),
});
export type SummaryCompactOptions = v.InferOutput<typeof SummaryCompactOptions>;

export function summaryCompactHarness(rawOptions: Record<string, unknown> = {}): Harness {
  const options = validate(SummaryCompactOptions, rawOptions, { file: "harness options (summary_compact)" });
  const request: ChatMessage = { role: "user", content: [{ type: "text", text: SUMMARY_REQUEST }] };
  // The reopening message of each summary, built once: later turns continue the
  // conversation by these very message objects.
  const reopenings = new WeakMap<EpisodeSummary, ChatMessage>();
  return defineHarness({
    name: "summary_compact",
    rowPerTurn: true,
    stopOnSuccess: true,
    summary: { request, summaryBudget: options.summary_budget, compactBudget: options.compact_budget },
    prompt: ({ system, initial, turns, summary }) => {
      if (!summary) return [system, initial, ...turns.flatMap((t) => [t.assistant, t.observation])];
      let reopening = reopenings.get(summary);
      if (!reopening) {
        const pending = summary.afterTurns > 0 ? turns[summary.afterTurns - 1]!.observation : initial;
        reopening = { role: "user", content: [{ type: "text", text: `${SUMMARY_PREFIX}${summary.text}\n\n` }, ...pending.content] };
        reopenings.set(summary, reopening);
      }
      return [system, reopening, ...turns.slice(summary.afterTurns).flatMap((t) => [t.assistant, t.observation])];
    },
  });
}
