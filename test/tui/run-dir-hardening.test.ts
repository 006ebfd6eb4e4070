/**
 * `vagen monitor` on run directories that are broken, hostile or gone: bad lines are
 * skipped and named, nothing from a file can act on the terminal, a deleted directory is
 * reported, and a training run that reached its last step shows as finished.
 */
import { afterEach, describe, expect, test } from "bun:test";
import { appendFileSync, cpSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { loadEpisode } from "../../src/tui/episode.ts";
import type { DashboardEvent } from "../../src/tui/events.ts";
import { printable, printableLine } from "../../src/tui/printable.ts";
import { RunDirReader } from "../../src/tui/run-dir.ts";
import { type DashboardState, initialState, reduce } from "../../src/tui/state.ts";
import { summaryText } from "../../src/tui/summary-text.ts";

const FIXTURE = join(import.meta.dir, "..", "fixtures", "run-dir");
const temporaries: string[] = [];
afterEach(() => {
  for (const dir of temporaries.splice(0)) rmSync(dir, { recursive: true, force: true });
});

function temporary(): string {
  const dir = mkdtempSync(join(tmpdir(), "vagen-monitor-"));
  temporaries.push(dir);
  return dir;
}

function copyOf(name: string): string {
  const dir = temporary();
  cpSync(join(FIXTURE, name), dir, { recursive: true });
  return dir;
}

const fold = (events: DashboardEvent[], state: DashboardState = initialState()) => events.reduce((s, e) => reduce(s, e, 0), state);
const warningsOf = (events: DashboardEvent[]) => events.flatMap((e) => (e.type === "warning" ? [e.message] : []));

/** Control characters other than newline: what must never reach the terminal from a file. */
const CONTROL = /[\x00-\x09\x0b-\x1f\x7f-\x9f]/;

describe("printable", () => {
  test("control bytes and bidi overrides are written out; newlines, tabs-as-text and ordinary Unicode stay", () => {
    expect(printable("a\x1b[2Jb\x07c\nd\x00\x7f\x9b")).toBe("a\\x1b[2Jb\\x07c\nd\\x00\\x7f\\x9b");
    expect(printable("tab\there")).toBe("tab\\x09here");
    expect(printable("evil\u202etxt.exe")).toBe("evil\\u{202e}txt.exe");
    expect(printable("ünïcode ▁▂▄ 你好")).toBe("ünïcode ▁▂▄ 你好");
    expect(printableLine("two\nlines")).toBe("two\\x0alines");
  });
});

describe("metrics.jsonl that is not all metrics", () => {
  test("null lines, null values, non-objects, bad steps and junk are skipped and named by file and line; good lines are read", () => {
    const dir = temporary();
    const path = join(dir, "metrics.jsonl");
    writeFileSync(
      path,
      [
        "null",
        '{"step": 1, "actor/entropy": null, "critic/score/mean": 0.5}',
        "[1, 2]",
        '"text"',
        '{"step": null}',
        '{"step": "2"}',
        '{"step": 1e400}',
        "{not json",
        "",
        '{"step": 2, "critic/score/mean": 0.7, "constructor": 3, "toString": 4}',
      ].join("\n") + "\n",
    );
    const reader = new RunDirReader(dir);
    const events = reader.poll();
    expect(events.filter((e) => e.type === "metrics")).toEqual([
      { type: "metrics", step: 1, metrics: { "critic/score/mean": 0.5 } },
      { type: "metrics", step: 2, metrics: { "critic/score/mean": 0.7, constructor: 3, toString: 4 } },
    ]);
    // The first five bad lines by number, the rest under one counted message.
    expect(warningsOf(events)).toEqual([
      `${path} line 1: skipped, expected a JSON object with a numeric "step", got null`,
      `${path} line 3: skipped, expected a JSON object with a numeric "step", got an array`,
      `${path} line 4: skipped, expected a JSON object with a numeric "step", got string`,
      `${path} line 5: skipped, expected a numeric "step" (a whole number >= 0), got null`,
      `${path} line 6: skipped, expected a numeric "step" (a whole number >= 0), got "2"`,
      `${path}: more lines skipped that are not metrics records`,
      `${path}: more lines skipped that are not metrics records`,
    ]);
    expect(reader.metricsCounts).toEqual({ read: 2, skipped: 7, firstSkipped: { line: 1, problem: 'expected a JSON object with a numeric "step", got null' } });
    expect(reader.unreadableMetrics()).toBeUndefined();
    // Metrics named like Object's own properties are ordinary series; the repeated warning is counted.
    const state = fold(events);
    expect(state.series["constructor"]).toEqual({ steps: [2], values: [3] });
    expect(state.series["critic/score/mean"]!.values).toEqual([0.5, 0.7]);
    expect(state.warnings.at(-1)).toMatchObject({ message: `${path}: more lines skipped that are not metrics records`, count: 2 });
    expect(summaryText(state)).toContain(`${path}: more lines skipped that are not metrics records (x2)`);
  });

  test("a file with lines but no readable one says so, naming the file and its first bad line", () => {
    const dir = temporary();
    writeFileSync(join(dir, "metrics.jsonl"), "\nnull\ngarbage\n");
    const reader = new RunDirReader(dir);
    reader.poll();
    expect(reader.unreadableMetrics()).toBe(`${join(dir, "metrics.jsonl")}: no line is a metrics record (2 lines skipped; line 2: expected a JSON object with a numeric "step", got null)`);
    // A file still empty (a run just started) is not broken.
    const empty = temporary();
    writeFileSync(join(empty, "metrics.jsonl"), "");
    const fresh = new RunDirReader(empty);
    fresh.poll();
    expect(fresh.unreadableMetrics()).toBeUndefined();
  });

  test("line numbers keep counting across polls as the file grows", () => {
    const dir = copyOf("train");
    const reader = new RunDirReader(dir);
    reader.poll();
    appendFileSync(join(dir, "metrics.jsonl"), '{"step": 7}\n');
    reader.poll();
    appendFileSync(join(dir, "metrics.jsonl"), "null\n");
    expect(warningsOf(reader.poll())).toEqual([`${join(dir, "metrics.jsonl")} line 8: skipped, expected a JSON object with a numeric "step", got null`]);
  });
});

describe("text from run files never acts on the terminal", () => {
  test("junk lines, metric names, episode texts, tags and errors are shown escaped in --once's summary", () => {
    const dir = temporary();
    writeFileSync(join(dir, "metrics.jsonl"), '\x1b[2J\x1b]0;pwned\x07junk\n{"step": 1, "evil\\u001b[31m": 2}\n');
    const step = join(dir, "rollouts", "step_1", "000_x\x1b[5m_seed0_traj0");
    mkdirSync(step, { recursive: true });
    writeFileSync(
      join(step, "metrics.json"),
      JSON.stringify({ tag: "tag\x1b[1m", seed: 0, success: false, cumulative_reward: 0, finish_reason: "env_error\x07", error: { message: "\x1b]52;c;Y2xpcA==\x07boom" } }),
    );
    writeFileSync(join(step, "messages.json"), JSON.stringify([{ role: "user", content: [{ type: "text", text: "obs\x1b[H" }] }, { role: "assistant", content: [{ type: "text", text: "reply\x1b[?1049l" }] }]));
    const events = new RunDirReader(dir).poll();
    const text = summaryText(fold(events));
    expect(text).not.toMatch(CONTROL);
    expect(text).toContain("line 1: skipped, not JSON: \\x1b[2J\\x1b]0;pwned\\x07junk");
    expect(JSON.stringify(events)).not.toMatch(/\\u001b|\\u0007/);
    const episode = events.flatMap((e) => (e.type === "episode_loaded" ? [e.episode] : []))[0]!;
    expect(episode.id).toBe("step 1 000_x\\x1b[5m_seed0_traj0");
    expect(episode.tag).toBe("tag\\x1b[1m");
    expect(episode.error).toBe("\\x1b]52;c;Y2xpcA==\\x07boom");
    expect(episode.initialText).toBe("obs\\x1b[H");
    expect(episode.turns[0]!.reply).toBe("reply\\x1b[?1049l");
    expect(fold(events).series["evil\\x1b[31m"]).toEqual({ steps: [1], values: [2] });
  });

  test("episode files of the wrong shape are read as far as they make sense, never thrown on", () => {
    const dir = temporary();
    writeFileSync(join(dir, "metrics.json"), JSON.stringify({ seed: "x", infos: null, rewards: 5, error: "not an object" }));
    writeFileSync(join(dir, "messages.json"), JSON.stringify([null, 3, { role: "assistant", content: "not a list" }, { role: "user", content: [null, { type: "text", text: 5 }, { type: "text", text: "ok" }] }]));
    const episode = loadEpisode(dir)!;
    expect(episode).toMatchObject({ tag: "?", success: false, reward: 0, finishReason: "unknown", error: undefined });
    expect(episode.turns).toHaveLength(1);
    expect(episode.turns[0]).toMatchObject({ index: 1, reply: "", reward: 0, observationText: "ok", done: false });
    writeFileSync(join(dir, "metrics.json"), "null");
    expect(loadEpisode(dir)).toBeUndefined();
  });

  test("an eval run whose episode metrics are junk still gives a summary, with the junk named", () => {
    const dir = temporary();
    writeFileSync(join(dir, "config.yaml"), "envs: {a: {episodes: 2}, b: null}\nmodel: {model_dir: 5}\n");
    mkdirSync(join(dir, "a", "seed_0"), { recursive: true });
    mkdirSync(join(dir, "a", "seed_1"), { recursive: true });
    writeFileSync(join(dir, "a", "seed_0", "metrics.json"), "{}");
    writeFileSync(join(dir, "a", "seed_1", "metrics.json"), "[1]");
    writeFileSync(join(dir, "summary.json"), "null");
    const events = new RunDirReader(dir).poll();
    expect(warningsOf(events)).toEqual([`${join(dir, "a", "seed_1", "metrics.json")}: skipped, not an episode's metrics (expected a JSON object)`]);
    const text = summaryText(fold(events));
    expect(text).toMatch(/^a +0\/2/m);
    expect(text).toMatch(/^\? +1\/1/m);
  });
});

describe("a run directory that disappears", () => {
  test("the next poll says it is gone, once; nothing is read after", () => {
    const dir = copyOf("train");
    const reader = new RunDirReader(dir);
    reader.poll();
    rmSync(dir, { recursive: true, force: true });
    const events = reader.poll();
    expect(events).toEqual([{ type: "warning", step: 0, code: "run_dir_gone", message: `the run directory ${dir} is gone (deleted or moved); nothing more will appear` }]);
    expect(reader.gone).toBe(true);
    expect(reader.poll()).toEqual([]);
    // Even if something of the same name shows up again, this reader is done.
    mkdirSync(dir);
    writeFileSync(join(dir, "metrics.jsonl"), '{"step": 1}\n');
    expect(reader.poll()).toEqual([]);
  });
});

describe("a training run that reached its last step", () => {
  test("is marked finished once, when metrics.jsonl reports the config's total steps", () => {
    const dir = copyOf("train");
    const reader = new RunDirReader(dir);
    // The fixture is at step 6 of 10: still running.
    const first = reader.poll();
    expect(first.some((e) => e.type === "run_finished")).toBe(false);
    expect(summaryText(fold(first))).not.toContain("finished");
    for (const step of [7, 8, 9]) appendFileSync(join(dir, "metrics.jsonl"), `{"step": ${step}, "critic/score/mean": 0.8}\n`);
    expect(reader.poll().some((e) => e.type === "run_finished")).toBe(false);
    appendFileSync(join(dir, "metrics.jsonl"), '{"step": 10, "critic/score/mean": 0.9}\n');
    const last = reader.poll();
    expect(last.filter((e) => e.type === "run_finished")).toEqual([{ type: "run_finished", step: 10, reason: "completed", checkpoint: join(dir, "checkpoints", "step_6") }]);
    expect(reader.poll()).toEqual([]);
    const state = fold(last, fold(first));
    expect(state.finished).toEqual({ reason: "completed", error: undefined, checkpoint: join(dir, "checkpoints", "step_6") });
    expect(summaryText(state)).toContain(`train run ${dir}: step 10/10, finished (completed)`);
  });

  test("a run without total steps in its config is never guessed finished", () => {
    const dir = temporary();
    writeFileSync(join(dir, "metrics.jsonl"), '{"step": 100}\n');
    expect(new RunDirReader(dir).poll().some((e) => e.type === "run_finished")).toBe(false);
  });
});
