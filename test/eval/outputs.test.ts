import { describe, expect, test } from "bun:test";
import { readdirSync } from "node:fs";
import { join, resolve } from "node:path";
import { createHarness } from "../../src/harness/registry.ts";
import { loadEvalConfig } from "../../src/evaluation/config.ts";
import { harnessChoice } from "../../src/evaluation/plan.ts";
import type { EpisodeMetrics } from "../../src/evaluation/episode-metrics.ts";
import { episodeMetrics, episodeSuccess } from "../../src/evaluation/episode-metrics.ts";
import { evalBarRenderer, evalLogRenderer } from "../../src/cli/render/eval-lines.ts";
import type { EvalEvent, EvalProgress } from "../../src/evaluation/events.ts";
import { formatSummaryTable, summarizeEnv } from "../../src/evaluation/summary.ts";
import { renderTranscript } from "../../src/evaluation/transcript.ts";
import type { EpisodeRecord, TurnRecord } from "../../src/harness/types.ts";

const EXAMPLES = resolve(import.meta.dir, "../../examples/eval");

function turn(index: number, reward: number, info: TurnRecord["info"], text = "<answer>x</answer>"): TurnRecord {
  return { index, prompt: [], completion: { text, finishReason: "stop", usage: { promptTokens: 10, completionTokens: 3 } }, reward, done: false, info, observation: { text: `obs ${index}`, images: [] } };
}

function record(turns: TurnRecord[], finishReason: EpisodeRecord["finishReason"] = "max_turns"): EpisodeRecord {
  return {
    harness: "concat",
    rowPerTurn: false,
    seed: 3,
    systemPrompt: { text: "sys", images: [] },
    initialObservation: { text: "obs 0", images: [] },
    resetInfo: {},
    turns,
    finishReason,
    totalReward: turns.reduce((s, t) => s + t.reward, 0),
  };
}

const ctx = { envName: "Line", tag: "line", model: "m", maxTurns: 5, envConfig: {} };

describe("example configs", () => {
  test("every example config loads and validates, and the example harness loads by import path", async () => {
    const files = readdirSync(EXAMPLES).filter((f) => f.endsWith(".yaml") && !f.startsWith("_"));
    expect(files.length).toBeGreaterThanOrEqual(5);
    for (const file of files) {
      const config = await loadEvalConfig(join(EXAMPLES, file), []);
      for (const spec of Object.values(config.envs)) {
        const { name, options } = harnessChoice(spec.harness);
        const harness = await createHarness(name, options, EXAMPLES);
        expect(typeof harness.runEpisode).toBe("function");
      }
    }
    const all = await loadEvalConfig(join(EXAMPLES, "all.yaml"), ["envs.frozenlake_vision.episodes=2"]);
    expect(all.envs.frozenlake_vision!.episodes).toBe(2);
    expect(all.model).toMatchObject({ backend: "openai", base_url: "http://127.0.0.1:8000/v1" });
  });
});

describe("episode metrics", () => {
  test("format errors come from info.format_correct or metrics.turn_metrics.format_correct; unknown turns don't count", () => {
    const m = episodeMetrics(
      record([turn(1, 0, { format_correct: false }), turn(2, 0.1, { metrics: { turn_metrics: { format_correct: true } } }), turn(3, 0, {})]),
      ctx,
    );
    expect(m.format_errors).toBe(1);
    expect(m.format_checked_turns).toBe(2);
    expect(m.usage).toEqual({ prompt_tokens: 30, completion_tokens: 9 });
    expect(m.infos.length).toBe(4);
  });

  test("success: the last info's success / is_success / solved; else a final reward above 0.99 when the env ended it", () => {
    expect(episodeSuccess(record([turn(1, 0, { success: true }), turn(2, 0, { success: false })]))).toBe(false);
    expect(episodeSuccess(record([turn(1, 0, { solved: true })]))).toBe(true);
    expect(episodeSuccess(record([turn(1, 1, {})], "done"))).toBe(true);
    expect(episodeSuccess(record([turn(1, 1, {})], "max_turns"))).toBe(false);
  });
});

describe("summary", () => {
  const metrics = (success: boolean, reward: number, turns: number, fmt: [number, number], finish: EpisodeMetrics["finish_reason"] = "done") =>
    ({ success, cumulative_reward: reward, num_turns: turns, format_errors: fmt[0], format_checked_turns: fmt[1], finish_reason: finish }) as EpisodeMetrics;

  test("rates and means over finished episodes; format error rate over judged turns", () => {
    const s = summarizeEnv("Sokoban", "concat", 4, [metrics(true, 1.1, 1, [0, 1]), metrics(false, 0.2, 5, [3, 5]), metrics(false, 0, 0, [0, 0], "model_error")]);
    expect(s).toEqual({
      env_name: "Sokoban",
      harness: "concat",
      episodes: 3,
      planned: 4,
      success_rate: 1 / 3,
      mean_reward: 1.3 / 3,
      mean_turns: 2,
      format_error_rate: 0.5,
      error_episodes: 1,
    });
    const table = formatSummaryTable({ created_at: "", model: "m", complete: false, envs: { sokoban: s, empty: summarizeEnv("X", "concat", 2, []) } });
    expect(table.split("\n")[1]).toMatch(/^sokoban\s+3\/4\s+0\.333\s+0\.433\s+2\.00\s+0\.500\s+1$/);
    expect(table.split("\n")[2]).toMatch(/^empty\s+0\/2\s+0\.000\s+0\.000\s+0\.00\s+-\s+0$/);
  });
});

describe("transcript and progress views", () => {
  test("the transcript fences text that itself contains backticks", () => {
    const rec = record([turn(1, 0.1, { actions: ["up"], format_correct: true }, "```python\nx\n```")]);
    const md = renderTranscript(rec, episodeMetrics(rec, ctx));
    expect(md).toContain("````text\n```python\nx\n```\n````");
    expect(md).toContain('**Env:** actions ["up"]; format ok; reward 0.100; done false');
  });

  test("the log view writes one line per episode; the bar redraws one line with \\r", () => {
    const lines: string[] = [];
    const out = { write: (t: string) => lines.push(t) };
    const m = episodeMetrics(record([turn(1, 1.1, { success: true })], "done"), ctx);
    const started = (progress: EvalProgress): EvalEvent => ({ type: "run_started", outputDir: "out", model: "m", maxConcurrentEpisodes: 1, envs: [], progress });
    const finished = (progress: EvalProgress): EvalEvent => ({
      type: "episode_finished",
      tag: m.tag,
      envName: m.env_name,
      seed: m.seed,
      dir: "d",
      success: m.success,
      reward: m.cumulative_reward,
      turns: m.num_turns,
      finishReason: m.finish_reason,
      progress,
    });
    const log = evalLogRenderer(out);
    log(started({ done: 1, total: 2, running: 0, successes: 1, errors: 0 }));
    log(finished({ done: 2, total: 2, running: 0, successes: 2, errors: 0 }));
    expect(lines).toEqual(["eval: 2 episode(s), 1 already finished (resume)\n", "[2/2] line seed 3: success, reward 1.100, 1 turn(s)\n"]);

    lines.length = 0;
    const bar = evalBarRenderer(out, 10);
    bar(started({ done: 0, total: 4, running: 0, successes: 0, errors: 0 }));
    bar(finished({ done: 2, total: 4, running: 1, successes: 1, errors: 0 }));
    expect(lines[lines.length - 1]).toBe("\r\x1b[2Keval [#####-----] 2/4  running 1  success 1  errors 0");
  });
});
