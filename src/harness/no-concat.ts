/**
 * no_concat: each turn sees only the system prompt and the current observation. One
 * training row per turn. As in VAGEN's no-concat loop, only `done` ends the episode
 * (a reported success without done does not).
 */
import { defineHarness } from "./loop.ts";
import type { Harness } from "./types.ts";

export function noConcatHarness(): Harness {
  return defineHarness({
    name: "no_concat",
    rowPerTurn: true,
    stopOnSuccess: false,
    prompt: ({ system, current }) => [system, current],
  });
}
