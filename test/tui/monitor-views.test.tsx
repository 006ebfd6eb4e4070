/**
 * What the dashboard and `--once` show for the cases: the validation curve over
 * the whole run, a finished run marked finished (never "waiting for the next phase"), an
 * 80-column header that keeps the step and its bar, live views before their run has
 * started, and checkpoints that keep_checkpoints pruned.
 */
import { afterEach, describe, expect, test } from "bun:test";
import { render } from "ink-testing-library";
import { cpSync, mkdirSync, mkdtempSync, renameSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { chartLayout, idleLine } from "../../src/tui/components/train-overview.tsx";
import { Dashboard, headerParts } from "../../src/tui/dashboard.tsx";
import type { DashboardEvent } from "../../src/tui/events.ts";
import { RunDirReader } from "../../src/tui/run-dir.ts";
import { type DashboardState, initialState, reduce } from "../../src/tui/state.ts";
import { DashboardStore } from "../../src/tui/store.ts";
import { summaryText } from "../../src/tui/summary-text.ts";
import { removedCheckpoints } from "../../src/tui/train-dashboard.ts";

const FIXTURE = join(import.meta.dir, "..", "fixtures", "run-dir");
const temporaries: string[] = [];
afterEach(() => {
  for (const dir of temporaries.splice(0)) rmSync(dir, { recursive: true, force: true });
});

function temporary(): string {
  const dir = mkdtempSync(join(tmpdir(), "vagen-monitor-views-"));
  temporaries.push(dir);
  return dir;
}

const fold = (events: DashboardEvent[], from: DashboardState = initialState(0)) => events.reduce((s, e) => reduce(s, e, 0), from);

function storeWith(events: DashboardEvent[]): DashboardStore {
  const store = new DashboardStore(0, () => 0);
  for (const e of events) store.dispatch(e);
  return store;
}

/** A training run's files: `steps` lines of metrics, a validation every third step, total 12. */
function trainRun(steps: number, total = 12): string {
  const dir = temporary();
  writeFileSync(join(dir, "config.yaml"), `trainer:\n  total_steps: ${total}\n`);
  const lines = Array.from({ length: steps }, (_, i) => {
    const step = i + 1;
    const val = step % 3 === 0 ? { "val/sokoban/mean_reward": step / 10, "val/sokoban/success_rate": step / 12 } : {};
    return JSON.stringify({ step, "critic/score/mean": step / 20, "actor/entropy": 2 - step / 10, "timing_s/step": 10, ...val });
  });
  writeFileSync(join(dir, "metrics.jsonl"), `${lines.join("\n")}\n`);
  return dir;
}

const stateOf = (dir: string) => fold(new RunDirReader(dir).poll());

describe("the validation curve", () => {
  test("every validation of the run is a point of one series, in step order", () => {
    const s = fold([
      { type: "validation", step: 0, metrics: {}, meanReward: 0.1, best: true },
      { type: "validation", step: 5, metrics: {}, meanReward: 0.4, best: true },
      // No reward metric: the table is kept, no point is added.
      { type: "validation", step: 7, metrics: { "val/x/failed_episodes": 1 }, meanReward: Number.NaN, best: false },
      { type: "validation", step: 10, metrics: {}, meanReward: 0.3, best: false },
    ]);
    expect(s.validations).toEqual({ steps: [0, 5, 10], values: [0.1, 0.4, 0.3] });
    // The table is the last validation's.
    expect(s.validation?.step).toBe(10);
  });

  test("from a run's files: the mean of val/<env>/mean_reward, charted after the reward and listed by --once", () => {
    const dir = trainRun(9);
    const state = stateOf(dir);
    // Steps 3, 6, 9: 0.3, 0.6, 0.9.
    expect(state.validations.steps).toEqual([3, 6, 9]);
    expect(state.validations.values.map((v) => Number(v.toFixed(6)))).toEqual([0.3, 0.6, 0.9]);
    const { lastFrame, unmount } = render(<Dashboard store={storeWith(new RunDirReader(dir).poll())} title="vagen monitor" size={{ columns: 80, rows: 24 }} />);
    expect(lastFrame()).toContain("val reward 0.9000 steps 3-9");
    unmount();
    const text = summaryText(state);
    expect(text).toMatch(/val reward +0\.9000 +0\.3000 +0\.9000 +3-9 +▁▄█/);
    expect(text).toContain("validation mean reward by step: 3: 0.3000, 6: 0.6000, 9: 0.9000");
  });
});

test("a metrics line with Python's bare NaN is read, the NaN left out, not skipped as junk", () => {
  const dir = temporary();
  writeFileSync(join(dir, "metrics.jsonl"), '{"step": 1, "actor/ppo_kl": NaN, "actor/entropy": 1.5, "val/a/mean_reward": 0.5}\n');
  const reader = new RunDirReader(dir);
  const state = fold(reader.poll());
  expect(reader.metricsCounts).toEqual({ read: 1, skipped: 0 });
  expect(state.series["actor/entropy"]).toEqual({ steps: [1], values: [1.5] });
  expect(state.series["actor/ppo_kl"]).toBeUndefined();
  expect(state.validations).toEqual({ steps: [1], values: [0.5] });
  expect(state.warnings).toEqual([]);
});

describe("a finished run", () => {
  test("its files at total_steps: header, phase line and footer say finished; never 'waiting for the next phase'", () => {
    const dir = trainRun(12);
    const { lastFrame, unmount } = render(<Dashboard store={storeWith(new RunDirReader(dir).poll())} title="vagen monitor" size={{ columns: 80, rows: 24 }} />);
    const frame = lastFrame()!;
    expect(frame).toContain("step 12/12");
    expect(frame).toContain("100% finished");
    expect(frame).toContain("run completed");
    expect(frame).toContain("finished: completed");
    expect(frame).not.toContain("waiting for the next phase");
    expect(frame).not.toContain("ETA");
    unmount();
  });

  test("the phase line when no phase runs: how the run ended, what a live view waits for, or the last step written", () => {
    const files = stateOf(trainRun(5));
    expect(idleLine(files)).toBe("running: step 5 of 12 is the last one written (phases show live in vagen train)");
    expect(idleLine(fold([{ type: "run_finished", step: 3, reason: "failed", error: "CUDA out of memory" }], files))).toBe("run failed: CUDA out of memory");
    expect(idleLine(fold([{ type: "starting", kind: "train", message: "starting: loading the model" }]))).toBe("starting: loading the model");
    expect(idleLine(fold([{ type: "step_finished", step: 1, totalSteps: 4, seconds: 3 }]))).toBe("waiting for the next phase");
  });
});

describe("the header at 80 columns", () => {
  const running = (title: string) =>
    fold([
      { type: "run_started", outputDir: "runs/t", startStep: 0, totalSteps: 200, estimator: "gae", useCritic: true, envs: ["sokoban"], device: "cuda", dtype: "bfloat16" },
      { type: "step_finished", step: 120, totalSteps: 200, seconds: 3725 },
    ]);

  test("a long run name is cut; the step, the bar, the percentage and the ETA stay", () => {
    const title = "vagen monitor sokoban-qwen2.5-vl-3b-bi-level-gae-world-model-reward-run-7";
    const parts = headerParts(running(title), title, "overview", 80);
    // 120 of 200 at 3725 s a step: 80 left, 298000 s = 82h46m.
    expect(parts.progress).toBe(`step 120/200 ${"█".repeat(6)}${"░".repeat(4)} 60% ETA 82h46m`);
    expect(parts.title.endsWith("…")).toBe(true);
    // Only the pane shown is named at this width.
    expect(parts.tabs.map((t) => t.text)).toEqual([" 1 overview ", " 2 ", " 3 "]);
    const width = parts.title.length + 1 + parts.progress.length + parts.tabs.reduce((n, t) => n + t.text.length, 0);
    expect(width).toBeLessThanOrEqual(80);
  });

  test("rendered with ink at 80x24: the first line holds the step and the bar, and fits", () => {
    const title = "vagen monitor a-very-long-run-directory-name-that-used-to-push-the-progress-off";
    const store = new DashboardStore(0, () => 0);
    for (const e of [
      { type: "run_started", outputDir: "runs/t", startStep: 0, totalSteps: 200, estimator: "gae", useCritic: true, envs: ["sokoban"], device: "cuda", dtype: "bfloat16" },
      { type: "step_finished", step: 120, totalSteps: 200, seconds: 3725 },
    ] satisfies DashboardEvent[]) store.dispatch(e);
    const { lastFrame, unmount } = render(<Dashboard store={store} title={title} size={{ columns: 80, rows: 24 }} />);
    const first = lastFrame()!.split("\n")[0]!;
    expect(first).toContain("vagen monitor a-very");
    expect(first).toContain("step 120/200 ██████░░░░ 60% ETA 82h46m");
    expect(first).toContain("1 overview");
    expect(Bun.stringWidth(first)).toBeLessThanOrEqual(80);
    unmount();
  });

  test("a run without a known total: the step, no bar to fill", () => {
    const state = fold([{ type: "metrics", step: 7, metrics: { "actor/entropy": 1 } }]);
    expect(headerParts(state, "t", "overview", 80).progress).toBe("step 7");
  });

  test("a wide terminal names every pane", () => {
    expect(headerParts(running("t"), "t", "details", 160).tabs.map((t) => t.text)).toEqual([" 1 overview ", " 2 rollouts ", " 3 details "]);
  });
});

describe("chart rows", () => {
  test("the lines left over go to the rows, one each, so none are blank", () => {
    // 9 charts in 2 columns: 5 rows; 19 lines / 5 = 3 each, the 4 left over to the first four rows.
    expect(chartLayout(9, 2, 19)).toEqual({ rows: [4, 4, 4, 4, 3], hidden: 0 });
    // 7 charts in 3 columns: 3 rows in 37 lines, 12 each (the most), 1 line unused.
    expect(chartLayout(7, 3, 37)).toEqual({ rows: [12, 12, 12], hidden: 0 });
  });

  test("charts that do not fit: a line is kept for saying so", () => {
    // 12 charts in 2 columns need 6 rows of at least 3 lines; 14 lines: 13 / 3 = 4 rows (8 charts), 1 line left over to the first.
    expect(chartLayout(12, 2, 14)).toEqual({ rows: [4, 3, 3, 3], hidden: 4 });
    expect(chartLayout(0, 2, 14)).toEqual({ rows: [], hidden: 0 });
  });
});

describe("live views before their run starts", () => {
  test("eval: the starting message, not the training placeholder", () => {
    const store = storeWith([{ type: "starting", kind: "eval", message: "starting: setting up the model and the envs for 6 episode(s)" }]);
    const { lastFrame, unmount } = render(<Dashboard store={store} title="vagen eval" size={{ columns: 80, rows: 24 }} />);
    const frame = lastFrame()!;
    expect(frame).toContain("starting: setting up the model and the envs for 6 episode(s)");
    expect(frame).not.toContain("waiting for the next phase");
    expect(frame).not.toContain("no metrics yet");
    expect(frame).not.toContain("episodes 0/0");
    store.dispatch({ type: "eval_started", outputDir: "runs/e", envs: [{ tag: "sokoban", planned: 6 }] });
    unmount();
    const after = render(<Dashboard store={store} title="vagen eval" size={{ columns: 80, rows: 24 }} />);
    expect(after.lastFrame()).toContain("episodes 0/6");
    expect(after.lastFrame()).not.toContain("starting:");
    after.unmount();
  });

  test("a monitored directory with nothing in it yet: neither the training nor the eval pane", () => {
    const dir = temporary();
    const { lastFrame, unmount } = render(<Dashboard store={storeWith(new RunDirReader(dir).poll())} title="vagen monitor" size={{ columns: 80, rows: 24 }} />);
    expect(lastFrame()).toContain(`nothing recognisable in ${dir} yet`);
    expect(lastFrame()).not.toContain("waiting for the next phase");
    unmount();
  });
});

describe("checkpoints pruned by keep_checkpoints", () => {
  test("the reader reports a checkpoint folder that is gone; the summary lists only what is on disk", () => {
    const dir = temporary();
    cpSync(join(FIXTURE, "train"), dir, { recursive: true });
    const reader = new RunDirReader(dir);
    let state = fold(reader.poll());
    expect(summaryText(state)).toContain("checkpoints: step 3, step 6");
    // The trainer saves step 9 and prunes to the newest one.
    mkdirSync(join(dir, "checkpoints", "step_9"));
    rmSync(join(dir, "checkpoints", "step_3"), { recursive: true });
    rmSync(join(dir, "checkpoints", "step_6"), { recursive: true });
    const events = reader.poll();
    expect(events.filter((e) => e.type === "checkpoint_removed").map((e) => (e as { path: string }).path).sort()).toEqual([join(dir, "checkpoints", "step_3"), join(dir, "checkpoints", "step_6")]);
    state = fold(events, state);
    expect(summaryText(state)).toContain("checkpoints: step 9\n");
  });

  test("the live view: removal events for listed folders that no longer exist; best_actor saved again is listed once", () => {
    const dir = temporary();
    const path = (name: string) => join(dir, name);
    mkdirSync(path("step_4"));
    mkdirSync(path("best_actor"));
    let state = fold([
      { type: "run_started", outputDir: dir, startStep: 0, totalSteps: 4, estimator: "gae", useCritic: true, envs: ["sokoban"], device: "cpu", dtype: "float32" },
      { type: "checkpoint_saved", step: 2, path: path("step_2"), seconds: 1, bestActor: false },
      { type: "checkpoint_saved", step: 2, path: path("best_actor"), seconds: 1, bestActor: true },
      { type: "checkpoint_saved", step: 4, path: path("step_4"), seconds: 1, bestActor: false },
      { type: "checkpoint_saved", step: 4, path: path("best_actor"), seconds: 1, bestActor: true },
    ]);
    const removed = removedCheckpoints(state);
    expect(removed).toEqual([{ type: "checkpoint_removed", path: path("step_2") }]);
    state = fold(removed, state);
    expect(summaryText(state)).toContain("checkpoints: step 4, step 4 (best actor)\n");
    // Moved away too: the newest is dropped as well.
    renameSync(path("step_4"), path("elsewhere"));
    expect(removedCheckpoints(state)).toEqual([{ type: "checkpoint_removed", path: path("step_4") }]);
  });
});
