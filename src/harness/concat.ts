/**
 * concat: one growing conversation, system + first observation + every reply and
 * observation since. One training row per episode (VAGEN's default agent loop); stops on
 * done or on reported success, like VAGEN's concat loop.
 */
import { defineHarness } from "./loop.ts";
import type { Harness } from "./types.ts";

export function concatHarness(): Harness {
  return defineHarness({
    name: "concat",
    rowPerTurn: false,
    stopOnSuccess: true,
    prompt: ({ system, initial, turns }) => [system, initial, ...turns.flatMap((t) => [t.assistant, t.observation])],
  });
}
