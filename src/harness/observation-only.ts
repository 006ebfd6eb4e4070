/**
 * The observation_only harness (`vagen demo`'s; any config or `vagen eval` can name it): each turn the policy sees only the current observation, no system
 * prompt and no history; an observation with images is reduced to its images.
 *
 * The env's system prompt explains the game and the answer format in English: that is
 * for a pretrained model that reads. The demo's policy starts from random weights and
 * learns the format from demonstrations, so the prompt would be ~150 tokens it attends
 * over on every turn without being able to use them: five times the compute per token
 * trained, for nothing. FrozenLake's observations are Markov (the board shows everything),
 * so one observation per turn loses no information.
 *
 * The words around a board image ("After your answer, the extracted valid action is
 * ['down']. After that, the observation is: ... Decide your next action(s).") carry
 * nothing the board does not show, but they name the last move, and imitation learns to
 * copy it: measured on the demo's supervised phase, with the words the held-out move
 * accuracy was 0.54 after 300 steps, with the board alone 0.82, at two thirds of the
 * step time (about 44 tokens a sample instead of 66-81, the tokenizer also learning the
 * template's default system line).
 */
import { imagesOnly } from "../core/chat.ts";
import { defineHarness } from "./loop.ts";
import type { Harness } from "./types.ts";

export const OBSERVATION_ONLY_HARNESS = "observation_only" as const;

export function observationOnlyHarness(): Harness {
  return defineHarness({
    name: OBSERVATION_ONLY_HARNESS,
    rowPerTurn: true,
    stopOnSuccess: false,
    prompt: ({ current }) => [imagesOnly(current)],
  });
}
