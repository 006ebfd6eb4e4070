/**
 * compact: system prompt, then one user message holding a short text history of earlier
 * turns (the actions taken and what came of them; no old images) followed by the current
 * observation. The prompt stays small however long the episode runs, so each turn is its
 * own training row.
 */
import * as v from "valibot";
import type { EnvInfo } from "../../envs/_common/types.ts";
import { validate } from "../config/index.ts";
import type { ChatMessage } from "../core/chat.ts";
import { defineHarness } from "./loop.ts";
import { reportedSuccess } from "./observation.ts";
import type { Harness, TurnRecord } from "./types.ts";

export const CompactOptions = v.strictObject({
  /** How many earlier turns the history keeps (the most recent ones). */
  history_turns: v.optional(v.pipe(v.number(), v.integer(), v.minValue(1)), 5),
  /** When the env reports no parsed actions, this much of the raw reply is quoted instead. */
  reply_chars: v.optional(v.pipe(v.number(), v.integer(), v.minValue(10)), 160),
});
export type CompactOptions = v.InferOutput<typeof CompactOptions>;

export function compactHarness(rawOptions: Record<string, unknown> = {}): Harness {
  const options = validate(CompactOptions, rawOptions, { file: "harness options (compact)" });
  return defineHarness({
    name: "compact",
    rowPerTurn: true,
    stopOnSuccess: true,
    prompt: ({ system, turns, current }) => {
      if (turns.length === 0) return [system, current];
      const kept = turns.slice(-options.history_turns);
      const skipped = turns.length - kept.length;
      const lines = kept.map((t) => summarizeTurn(t.record, options.reply_chars));
      const header = skipped > 0 ? `Earlier turns (${skipped} older turn(s) not shown):` : "Earlier turns:";
      const history = `${header}\n${lines.join("\n")}\n\nCurrent observation:\n`;
      const user: ChatMessage = { role: "user", content: [{ type: "text", text: history }, ...current.content] };
      return [system, user];
    },
  });
}

/** One line per turn: what the model did and what it got for it. */
export function summarizeTurn(turn: TurnRecord, replyChars: number): string {
  const parts = [`Turn ${turn.index}: ${describeActions(turn.info, turn.completion.text, replyChars)}`];
  if (turn.info.format_correct === false) parts.push("the answer was not in the required format");
  parts.push(`reward ${formatReward(turn.reward)}`);
  if (reportedSuccess(turn.info) === true) parts.push("success");
  return `${parts.join("; ")}.`;
}

function describeActions(info: EnvInfo, reply: string, replyChars: number): string {
  const actions = info.actions;
  if (Array.isArray(actions) && actions.every((a) => typeof a === "string")) {
    return actions.length > 0 ? `actions [${actions.join(", ")}]` : "no valid action";
  }
  const flat = reply.replace(/\s+/g, " ").trim();
  return `replied "${flat.length > replyChars ? `${flat.slice(0, replyChars)}...` : flat}"`;
}

function formatReward(r: number): string {
  return Number.isInteger(r) ? String(r) : r.toFixed(2);
}
