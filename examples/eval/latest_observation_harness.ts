/**
 * An example of a harness of your own, used by all.yaml through its import path
 * (`./latest_observation_harness.ts:latestObservation`). It sends the system prompt, a
 * one-line reminder of the previous answer, and the current observation.
 *
 * vagen calls the exported function with the options from the config and a kit of
 * helpers, so this file needs no runtime import from vagen (only types, which vanish).
 */
import type { Harness, HarnessKit } from "../../src/harness/types.ts";

export function latestObservation(options: Record<string, unknown>, kit: HarnessKit): Harness {
  const reminder = options.reminder !== false;
  return kit.defineHarness({
    name: "latest_observation",
    // Each turn's prompt is built afresh, so each turn is its own training row.
    rowPerTurn: true,
    stopOnSuccess: true,
    prompt: ({ system, turns, current }) => {
      const previous = turns[turns.length - 1];
      if (!reminder || !previous) return [system, current];
      const said = previous.record.completion.text.replace(/\s+/g, " ").slice(0, 200);
      return [system, { role: "user", content: [{ type: "text", text: `Your previous answer was: ${said}\n\n` }, ...current.content] }];
    },
  });
}
