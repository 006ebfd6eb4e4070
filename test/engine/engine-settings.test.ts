import { describe, expect, test } from "bun:test";
import * as v from "valibot";
import { EngineSettings } from "../../src/engine/load.ts";

describe("engine settings", () => {
  test("prefill batching is on by default: ready prompts wait up to 4 steps, or a quarter of the decoding count", () => {
    const s = v.parse(EngineSettings, {});
    expect(s.prefill_max_wait_steps).toBe(4);
    expect(s.prefill_wait_ratio).toBe(0.25);
    expect(v.parse(EngineSettings, { prefill_max_wait_steps: 0 }).prefill_max_wait_steps).toBe(0);
  });

  test("a negative or fractional wait and a negative ratio are refused", () => {
    expect(v.safeParse(EngineSettings, { prefill_max_wait_steps: -1 }).success).toBe(false);
    expect(v.safeParse(EngineSettings, { prefill_max_wait_steps: 1.5 }).success).toBe(false);
    expect(v.safeParse(EngineSettings, { prefill_wait_ratio: -0.5 }).success).toBe(false);
  });
});
