/**
 * The events of a scripted eval run: a fake client and a tiny env in this file, one
 * episode at a time so the order is fixed.
 */
import { afterEach, describe, expect, test } from "bun:test";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { Env, Observation } from "../../envs/_common/types.ts";
import type { Completion, InferenceClient } from "../../src/clients/types.ts";
import { validate } from "../../src/config/index.ts";
import type { RGBImage } from "../../src/core/image.ts";
import { EvalConfig } from "../../src/evaluation/config.ts";
import type { EvalEvent } from "../../src/evaluation/events.ts";
import { buildEvalPlan } from "../../src/evaluation/plan.ts";
import { runEvaluation } from "../../src/evaluation/runner.ts";

const PIXEL: RGBImage = { width: 1, height: 1, data: new Uint8Array([255, 0, 0]) };

/**
 * "Go" pays 1 (0.25 of it a world-model reward) and ends the episode; anything else
 * pays 0 and goes on. Each observation carries one 1x1 image.
 */
class GoEnv implements Env {
  async reset(seed: number) {
    return { obs: this.observe(`seed ${seed}`), info: {} };
  }
  async step(response: string) {
    const go = response === "go";
    const info = { actions: go ? ["go"] : [], format_correct: go, success: go, "state_reward/perception": go ? 0.25 : 0 };
    return { obs: this.observe(go ? "done" : "again"), reward: go ? 1 : 0, done: go, info };
  }
  async systemPrompt() {
    return { text: "Say go.", images: [] };
  }
  async close() {}
  private observe(text: string): Observation {
    return { text: `${text} <image>`, images: [PIXEL] };
  }
}

/** Answers from a script keyed by the first observation's text; "fail" rejects the request. */
function scriptedClient(script: Record<string, string[]>): InferenceClient {
  const turns = new Map<string, number>();
  return {
    description: "scripted",
    async create(messages): Promise<Completion> {
      const first = messages.find((m) => m.role === "user")!.content.find((p) => p.type === "text");
      const key = first && first.type === "text" ? first.text.replace(" <image>", "").trim() : "";
      const turn = turns.get(key) ?? 0;
      turns.set(key, turn + 1);
      const text = script[key]![turn]!;
      if (text === "fail") throw new Error("HTTP 400 from the scripted server");
      return { text, finishReason: "stop", usage: { promptTokens: 1, completionTokens: 1 } };
    },
  };
}

let dir: string | undefined;
afterEach(() => {
  if (dir) rmSync(dir, { recursive: true, force: true });
  dir = undefined;
});

describe("eval events", () => {
  test("a scripted run emits run, episode, turn, summary and end events in order", async () => {
    dir = mkdtempSync(join(tmpdir(), "vagen-events-"));
    const config = validate(EvalConfig, {
      output_dir: dir,
      model: { backend: "openai", base_url: "http://127.0.0.1:1/v1", model: "m" },
      run: { max_concurrent_episodes: 1 },
      envs: { go: { name: "Go", episodes: 2, seed_start: 1, max_turns: 3 }, bad: { name: "Go", episodes: 1, seeds: [9] } },
    });
    const client = scriptedClient({ "seed 1": ["wait", "go"], "seed 2": ["go"], "seed 9": ["fail"] });
    const events: EvalEvent[] = [];
    const result = await runEvaluation(buildEvalPlan(config), { client, createEnv: async () => new GoEnv(), onEvent: (e) => events.push(e) });

    // The sequence, one event per line: type, tag, seed, turn.
    const brief = events.map((e) => [e.type, "tag" in e ? e.tag : "", "seed" in e ? e.seed : "", "turn" in e ? e.turn : ""].join(" ").trim());
    expect(brief).toEqual([
      "run_started",
      "episode_started go 1",
      "turn_finished go 1 1",
      "turn_finished go 1 2",
      "episode_finished go 1",
      "episode_started go 2",
      "turn_finished go 2 1",
      "episode_finished go 2",
      "episode_started bad 9",
      "episode_finished bad 9",
      "env_summary go",
      "env_summary bad",
      "run_finished",
    ]);

    expect(events[0]).toEqual({
      type: "run_started",
      outputDir: dir,
      model: "scripted",
      maxConcurrentEpisodes: 1,
      envs: [
        { tag: "go", envName: "Go", harness: "concat", maxTurns: 3, episodes: 2, skipped: 0 },
        { tag: "bad", envName: "Go", harness: "concat", maxTurns: 5, episodes: 1, skipped: 0 },
      ],
      progress: { done: 0, total: 3, running: 0, successes: 0, errors: 0 },
    });
    expect(events[1]).toEqual({ type: "episode_started", tag: "go", envName: "Go", seed: 1, dir: join(dir, "go", "seed_1"), progress: { done: 0, total: 3, running: 1, successes: 0, errors: 0 } });

    // Turn 1 of seed 1: "wait" parses to no action, malformed, no reward.
    expect(events[2]).toEqual({
      type: "turn_finished",
      tag: "go",
      seed: 1,
      turn: 1,
      maxTurns: 3,
      text: "wait",
      completionFinishReason: "stop",
      action: { actions: [], formatCorrect: false },
      reward: { total: 0, worldModel: { perception: 0 }, env: 0 },
      done: false,
      observationText: "again <image>",
      images: [{ path: "images/obs_01_0.png", width: 1, height: 1, image: PIXEL }],
    });
    // Turn 2: "go" pays 1, of which 0.25 is the world-model part.
    expect(events[3]).toMatchObject({ turn: 2, text: "go", action: { actions: ["go"], formatCorrect: true }, reward: { total: 1, worldModel: { perception: 0.25 }, env: 0.75 }, done: true });
    expect(events[4]).toEqual({
      type: "episode_finished",
      tag: "go",
      envName: "Go",
      seed: 1,
      dir: join(dir, "go", "seed_1"),
      success: true,
      reward: 1,
      turns: 2,
      finishReason: "done",
      progress: { done: 1, total: 3, running: 0, successes: 1, errors: 0 },
    });
    // The model error: recorded, counted, no turns.
    expect(events[9]).toMatchObject({
      type: "episode_finished",
      seed: 9,
      success: false,
      turns: 0,
      finishReason: "model_error",
      error: { kind: "model_error", message: "HTTP 400 from the scripted server" },
      progress: { done: 3, total: 3, running: 0, successes: 2, errors: 1 },
    });
    expect(events[10]).toEqual({ type: "env_summary", tag: "go", summary: result.summary.envs.go! });
    expect(events[12]).toEqual({
      type: "run_finished",
      summary: result.summary,
      summaryPath: join(dir, "summary.json"),
      ran: 3,
      skipped: 0,
      aborted: false,
      progress: { done: 3, total: 3, running: 0, successes: 2, errors: 1 },
    });
  });

  test("on resume, finished episodes are counted in run_started and get no events", async () => {
    dir = mkdtempSync(join(tmpdir(), "vagen-events-"));
    const config = (episodes: number) =>
      validate(EvalConfig, {
        output_dir: dir,
        model: { backend: "openai", base_url: "http://127.0.0.1:1/v1", model: "m" },
        run: { max_concurrent_episodes: 1 },
        envs: { go: { name: "Go", episodes, seed_start: 1 } },
      });
    const client = scriptedClient({ "seed 1": ["go"], "seed 2": ["go"] });
    await runEvaluation(buildEvalPlan(config(1)), { client, createEnv: async () => new GoEnv() });
    const events: EvalEvent[] = [];
    await runEvaluation(buildEvalPlan(config(2)), { client, createEnv: async () => new GoEnv(), onEvent: (e) => events.push(e) });
    expect(events[0]).toMatchObject({ type: "run_started", envs: [{ tag: "go", episodes: 2, skipped: 1 }], progress: { done: 1, total: 2, successes: 1 } });
    expect(events.filter((e) => e.type === "episode_started").map((e) => (e.type === "episode_started" ? e.seed : -1))).toEqual([2]);
    expect(events.at(-1)).toMatchObject({ type: "run_finished", ran: 1, skipped: 1, progress: { done: 2, total: 2, successes: 2 } });
  });
});
