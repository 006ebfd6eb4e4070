/** The engine's events (src/engine/events.ts) over the fake runner: steps and finished requests. */
import { describe, expect, test } from "bun:test";
import { Engine } from "../../src/engine/engine.ts";
import type { EngineEvent } from "../../src/engine/events.ts";
import type { Prompt } from "../../src/engine/types.ts";
import { FakeRunner, letters } from "./fake-runner.ts";

const prompt = (...ids: number[]): Prompt => ({ tokenIds: ids, images: [] });

describe("engine events", () => {
  test("each step reports the counters; each request reports its tokens once; unsubscribing stops them", async () => {
    const engine = new Engine(new FakeRunner(4, 64, 50, false), { decode: letters, eosTokenIds: [] });
    const events: EngineEvent[] = [];
    const stop = engine.subscribe((e) => events.push(e));
    await Promise.all([
      engine.generate({ prompt: prompt(1, 2, 3), sampling: { temperature: 0, maxNewTokens: 4 } }),
      engine.generate({ prompt: prompt(4, 5), sampling: { temperature: 0, maxNewTokens: 2 } }),
    ]);
    const finished = events.filter((e) => e.type === "request_finished");
    expect(finished.map((e) => (e.type === "request_finished" ? [e.promptTokens, e.cachedPromptTokens, e.generatedTokens, e.finishReason] : []))).toEqual([
      [2, 0, 2, "length"],
      [3, 0, 4, "length"],
    ]);
    const steps = events.filter((e) => e.type === "step");
    const last = steps.at(-1);
    // The last step's counters: 5 prompt tokens prefilled, and each generated token after
    // the first (sampled by the prefill) came from a decode step: 3 + 1.
    expect(last?.type === "step" && [last.stats.prefillTokens, last.stats.decodeTokens]).toEqual([5, 4]);
    // One event per scheduler iteration: the prefill shares its iteration with the first
    // decode step, so here there is one per decode step.
    expect(steps.length).toBe(engine.stats().decodeSteps);

    stop();
    const before = events.length;
    await engine.generate({ prompt: prompt(6), sampling: { temperature: 0, maxNewTokens: 2 } });
    expect(events.length).toBe(before);
    await engine.close();
  });

  test("a listener that throws does not fail the request", async () => {
    const engine = new Engine(new FakeRunner(1, 64, 50, false), { decode: letters, eosTokenIds: [] });
    engine.subscribe(() => {
      throw new Error("a broken view");
    });
    const result = await engine.generate({ prompt: prompt(1), sampling: { temperature: 0, maxNewTokens: 3 } });
    expect(result.tokenIds.length).toBe(3);
    await engine.close();
  });
});
