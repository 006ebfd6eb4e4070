/** The plain views of `vagen eval` drawn from an event sequence, and the CLI's config kinds. */
import { describe, expect, test } from "bun:test";
import { configKind } from "../../src/config/index.ts";
import { evalBarRenderer, evalLogRenderer } from "../../src/cli/render/eval-lines.ts";
import { buildProgram, CONFIG_KINDS } from "../../src/cli/main.ts";
import type { EvalEvent, EvalProgress } from "../../src/evaluation/events.ts";
import type { EnvSummary, EvalSummary } from "../../src/evaluation/summary.ts";

const progress = (done: number, running: number, successes: number, errors: number): EvalProgress => ({ done, total: 4, running, successes, errors });
const envSummary: EnvSummary = { env_name: "Go", harness: "concat", episodes: 4, planned: 4, success_rate: 0.75, mean_reward: 0.75, mean_turns: 1, format_error_rate: 0, error_episodes: 1 };
const summary: EvalSummary = { created_at: "", model: "m", complete: true, envs: { go: envSummary } };
const finished = (seed: number, extra: Partial<Extract<EvalEvent, { type: "episode_finished" }>>, p: EvalProgress): EvalEvent => ({
  type: "episode_finished",
  tag: "go",
  envName: "Go",
  seed,
  dir: `/out/go/seed_${seed}`,
  success: true,
  reward: 1,
  turns: 1,
  finishReason: "done",
  progress: p,
  ...extra,
});

/** A run of four episodes, one already finished: a retry, a success, a failure with a leaked key in its error, an interrupt. */
const RUN: EvalEvent[] = [
  { type: "run_started", outputDir: "/out", model: "m", maxConcurrentEpisodes: 2, envs: [{ tag: "go", envName: "Go", harness: "concat", maxTurns: 3, episodes: 4, skipped: 1 }], progress: progress(1, 0, 1, 0) },
  { type: "episode_started", tag: "go", envName: "Go", seed: 2, dir: "/out/go/seed_2", progress: progress(1, 1, 1, 0) },
  { type: "episode_started", tag: "go", envName: "Go", seed: 3, dir: "/out/go/seed_3", progress: progress(1, 2, 1, 0) },
  { type: "turn_finished", tag: "go", seed: 2, turn: 1, maxTurns: 3, text: "go", completionFinishReason: "stop", action: { actions: ["go"] }, reward: { total: 1, worldModel: {}, env: 1 }, done: true, observationText: "done", images: [] },
  { type: "warning", code: "retry", message: "retry 1 in 0.50 s after: HTTP 429" },
  finished(2, { reward: 1.25, turns: 2 }, progress(2, 1, 2, 0)),
  finished(3, { success: false, reward: 0, turns: 0, finishReason: "model_error", error: { kind: "model_error", message: "HTTP 401: sent Bearer abc123secret" } }, progress(3, 0, 2, 1)),
  { type: "warning", code: "interrupted", message: "interrupted: stopping" },
  { type: "env_summary", tag: "go", summary: envSummary },
  { type: "run_finished", summary, summaryPath: "/out/summary.json", ran: 2, skipped: 1, aborted: true, progress: progress(3, 0, 2, 1) },
];

function draw(view: (out: { write: (t: string) => void }) => (e: EvalEvent) => void): string[] {
  const writes: string[] = [];
  const listener = view({ write: (t) => writes.push(t) });
  for (const event of RUN) listener(event);
  return writes;
}

describe("eval line views", () => {
  test("the log view: a start line, one line per finished episode, warnings as they come", () => {
    expect(draw(evalLogRenderer)).toEqual([
      "eval: 4 episode(s), 1 already finished (resume)\n",
      "retry 1 in 0.50 s after: HTTP 429\n",
      "[2/4] go seed 2: success, reward 1.250, 2 turn(s)\n",
      "[3/4] go seed 3: model_error, reward 0.000, 0 turn(s) (HTTP 401: sent Bearer [redacted])\n",
      "interrupted: stopping\n",
    ]);
  });

  test("the bar view: redrawn in place, errors and notices above it, retries counted", () => {
    const bar = (done: number, running: number, successes: number, errors: number, retries = "") =>
      `\r\x1b[2Keval [${"#".repeat(done * 2)}${"-".repeat(8 - done * 2)}] ${done}/4  running ${running}  success ${successes}  errors ${errors}${retries}`;
    expect(draw((out) => evalBarRenderer(out, 8))).toEqual([
      "resume: 1 episode(s) already finished\n",
      bar(1, 0, 1, 0),
      bar(1, 1, 1, 0),
      bar(1, 2, 1, 0),
      bar(1, 2, 1, 0, "  retries 1"),
      bar(2, 1, 2, 0, "  retries 1"),
      "\r\x1b[2Kgo seed 3: model_error: HTTP 401: sent Bearer [redacted]\n",
      bar(3, 0, 2, 1, "  retries 1"),
      bar(3, 0, 2, 1, "  retries 1"),
      "\r\x1b[2Kinterrupted: stopping\n",
      bar(3, 0, 2, 1, "  retries 1"),
      bar(3, 0, 2, 1, "  retries 1"),
      "\n",
    ]);
  });
});

describe("config kinds", () => {
  test("the CLI registers every config kind it lists when it builds the program", () => {
    expect(CONFIG_KINDS.map((k) => k.name)).toEqual(expect.arrayContaining(["eval", "train"]));
    buildProgram();
    for (const kind of CONFIG_KINDS) expect(configKind(kind.name)).toBe(kind);
  });
});
