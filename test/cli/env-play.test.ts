/** `vagen env play`: the episode's events (envs/cli/play.ts) and the terminal view that draws them. */
import { describe, expect, test } from "bun:test";
import { Readable } from "node:stream";
import type { Env } from "../../envs/_common/types.ts";
import { type PlayEvent, play } from "../../envs/cli/play.ts";
import { envPlayRenderer } from "../../src/cli/render/env-play.ts";

/** A corridor of three cells: "right" moves on, reaching the end solves it. Images are 2x2. */
function corridor(): Env & { closed: boolean } {
  let position = 0;
  const image = { width: 2, height: 2, data: new Uint8Array(12).fill(200) };
  const obs = () => ({ text: `at ${position} <image>\n`, images: [image] });
  return {
    closed: false,
    async reset(seed: number) {
      position = seed % 2;
      return { obs: obs(), info: {} };
    },
    async step(response: string) {
      const moved = response.includes("right");
      if (moved) position++;
      const done = position >= 2;
      return { obs: obs(), reward: done ? 1 : 0, done, info: { success: done, format_correct: moved, actions: moved ? ["right"] : [], metrics: { turn_metrics: { action_is_effective: moved } } } };
    },
    async systemPrompt() {
      return { text: "Walk right.", images: [] };
    },
    async close() {
      this.closed = true;
    },
  };
}

async function playScript(lines: string, seed = 0): Promise<{ events: PlayEvent[]; env: ReturnType<typeof corridor> }> {
  const events: PlayEvent[] = [];
  const env = corridor();
  await play({ env, seed, promptFormat: "free_think", input: Readable.from([lines]), onEvent: (e) => events.push(e) });
  return { events, env };
}

describe("env play", () => {
  test("events follow the script: help, reset, prompts, system prompt, steps with the running total", async () => {
    const { events, env } = await playScript("up\n:s\n\nright\nright\n:r\n:q\n");
    expect(events.map((e) => e.type)).toEqual([
      "help",
      "episode_started",
      "awaiting_input",
      "stepped",
      "awaiting_input",
      "system_prompt",
      "awaiting_input",
      "awaiting_input",
      "stepped",
      "awaiting_input",
      "stepped",
      "awaiting_input",
      "episode_started",
      "awaiting_input",
    ]);
    // Bare actions are wrapped in the env's format before the env sees them.
    expect(events[3]).toMatchObject({ type: "stepped", turn: 1, reward: 0, totalReward: 0, done: false, info: { format_correct: false } });
    expect(events[10]).toMatchObject({ type: "stepped", turn: 3, reward: 1, totalReward: 1, done: true, info: { success: true } });
    expect(events.filter((e) => e.type === "awaiting_input").map((e) => (e.type === "awaiting_input" ? e.turn : 0))).toEqual([1, 2, 2, 2, 3, 4, 1]);
    expect(events[12]).toMatchObject({ type: "episode_started", seed: 1 });
    expect(env.closed).toBe(true);
  });

  test("the terminal view draws the events as before: text, images or their size, the step summary", async () => {
    const { events } = await playScript("right\nright\n");
    let text = "";
    const view = envPlayRenderer({ output: { write: (t: string) => (text += t) }, color: false });
    for (const event of events) view(event);
    expect(text).toBe(
      [
        'Type a full response, or just actions like "up, left" (wrapped in the env\'s format).',
        "Commands: :r reset (next seed), :s system prompt, :h help, :q quit.",
        "",
        "=== seed 0 ===",
        "at 0 <image>",
        "[image 2x2]",
        "",
        "[turn 1] > at 1 <image>",
        "[image 2x2]",
        "reward 0 (total 0)  done false  success false",
        "parsed: format_correct=true actions=[\"right\"]",
        "metrics: action_is_effective=true",
        "",
        "[turn 2] > at 2 <image>",
        "[image 2x2]",
        "reward 1 (total 1)  done true  success true",
        "parsed: format_correct=true actions=[\"right\"]",
        "metrics: action_is_effective=true",
        "Solved! (:r for the next seed, :q to quit)",
        "",
        "[turn 3] > ",
      ].join("\n"),
    );

    let colour = "";
    const colourView = envPlayRenderer({ output: { write: (t: string) => (colour += t) }, columns: 80 });
    colourView(events[1]!);
    // One half-block row for a 2x2 image: two cells, each pixel pair in 24-bit colour.
    expect(colour).toContain("\x1b[38;2;200;200;200m\x1b[48;2;200;200;200m▀");
  });
});
