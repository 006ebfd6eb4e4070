/**
 * The observation_history harness: observation_only with the episode's history kept. One
 * growing conversation of the observations' images and the policy's replies, no system
 * prompt and none of the env's words (as observation_only, for policies learned from
 * scratch); one training row per episode, like VAGEN's concat.
 *
 * Why: with the current image alone a greedy policy that misreads a room repeats the same
 * move for as long as the room does not change (a bump into a wall, a box that cannot
 * move). With its earlier images and replies in view, a policy can tell that its last
 * move changed nothing. (On the demo's Sokoban recipe it did not learn better for it:
 * docs/demo.md.)
 */
import { imagesOnly, type ChatMessage } from "../core/chat.ts";
import { defineHarness } from "./loop.ts";
import type { Harness } from "./types.ts";

export const OBSERVATION_HISTORY_HARNESS = "observation_history" as const;

export function observationHistoryHarness(): Harness {
  // The loop continues a token-level conversation only when a turn's messages begin with
  // the very message objects sent before (token-conversations.ts), so each observation
  // is reduced once and the same reduced message is sent every turn after.
  const reduced = new WeakMap<ChatMessage, ChatMessage>();
  const imagesOf = (message: ChatMessage): ChatMessage => {
    let images = reduced.get(message);
    if (!images) reduced.set(message, (images = imagesOnly(message)));
    return images;
  };
  return defineHarness({
    name: OBSERVATION_HISTORY_HARNESS,
    rowPerTurn: false,
    stopOnSuccess: false,
    prompt: ({ initial, turns }) => [imagesOf(initial), ...turns.flatMap((t) => [t.assistant, imagesOf(t.observation)])],
  });
}
