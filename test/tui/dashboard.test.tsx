import { describe, expect, test } from "bun:test";
import { render } from "ink-testing-library";
import { join } from "node:path";
import { Dashboard } from "../../src/tui/dashboard.tsx";
import { loadEpisode } from "../../src/tui/episode.ts";
import type { DashboardEvent } from "../../src/tui/events.ts";
import { DashboardStore } from "../../src/tui/store.ts";

const FIXTURE = join(import.meta.dir, "..", "fixtures", "run-dir");
const KEYS = { tab: "\t", right: "\x1b[C", left: "\x1b[D", down: "\x1b[B", up: "\x1b[A", ctrlC: "\x03" };

/** A store that tells subscribers at once and runs on a fixed clock. */
function storeWith(events: DashboardEvent[], clock = { now: 0 }): DashboardStore {
  const store = new DashboardStore(0, () => clock.now);
  for (const e of events) store.dispatch(e);
  return store;
}

const settle = () => new Promise((resolve) => setTimeout(resolve, 30));

/** The frame fits: no more rows than the terminal has, no row wider than it. */
function expectFits(frame: string, columns: number, rows: number): void {
  const lines = frame.split("\n");
  expect(lines.length).toBeLessThanOrEqual(rows);
  for (const line of lines) expect(Bun.stringWidth(line)).toBeLessThanOrEqual(columns);
}

const trainEvents = (): DashboardEvent[] => [
  { type: "run_started", outputDir: "runs/t", startStep: 0, totalSteps: 4, estimator: "gae", useCritic: true, envs: ["sokoban"], device: "cpu", dtype: "float32" },
  ...[1, 2].flatMap((step): DashboardEvent[] => [
    { type: "step_started", step, totalSteps: 4 },
    { type: "metrics", step, metrics: { "critic/score/mean": step / 10, "actor/entropy": 2 - step / 10, "actor/ppo_kl": 0.01 * step, "train/sokoban/success_rate": step / 4, "perf/throughput": 900 } },
    { type: "step_finished", step, totalSteps: 4, seconds: 60 },
  ]),
  { type: "step_started", step: 3, totalSteps: 4 },
  { type: "phase_started", step: 3, phase: "rollout", total: 8 },
  { type: "phase_progress", step: 3, phase: "rollout", done: 3 },
  { type: "warning", step: 3, code: "truncation", message: "2 responses hit max_tokens" },
];

describe("train view", () => {
  test("step progress with ETA, phase progress, charts with latest values, the warning line", () => {
    const { lastFrame, unmount } = render(<Dashboard store={storeWith(trainEvents())} title="vagen train" size={{ columns: 80, rows: 24 }} />);
    const frame = lastFrame()!;
    // Step 3 of 4 with 60 s per step so far: 1 step left, ETA 1m00s.
    expect(frame).toContain("step 3/4");
    expect(frame).toContain("ETA 1m00s");
    expect(frame).toMatch(/rollout .*3\/8 episodes/);
    expect(frame).toContain("reward 0.2000");
    expect(frame).toContain("entropy 1.8000");
    expect(frame).toContain("KL 0.0200");
    expect(frame).toContain("success sokoban 0.5000");
    expect(frame).toContain("throughput 900.0 tok/s");
    expect(frame).toContain("⚠ step 3: 2 responses hit max_tokens");
    expectFits(frame, 80, 24);
    unmount();
  });

  test("a flood of warnings stays on one line, with the count", () => {
    const events = trainEvents();
    for (let i = 0; i < 40; i++) events.push({ type: "warning", step: 3, code: "judge", message: `judge failed on episode ${i} with a long explanation that would wrap the layout if it were printed in full` });
    const { lastFrame, unmount } = render(<Dashboard store={storeWith(events)} title="vagen train" size={{ columns: 80, rows: 24 }} />);
    const frame = lastFrame()!;
    expect(frame).toContain("⚠ 41 warnings, latest: step 3: judge failed on episode 39");
    expectFits(frame, 80, 24);
    unmount();
  });

  test("a big terminal gets three columns of charts and the last validation under them", () => {
    const events: DashboardEvent[] = [...trainEvents(), { type: "validation", step: 2, metrics: { "val/sokoban/success_rate": 0.25 }, meanReward: 0.3, best: true }];
    const { lastFrame, unmount } = render(<Dashboard store={storeWith(events)} title="vagen train" size={{ columns: 160, rows: 48 }} />);
    const frame = lastFrame()!;
    // The validation curve follows the reward, then the key metrics.
    expect(frame.split("\n").some((line) => /reward .*val reward .*KL/.test(line))).toBe(true);
    expect(frame).toContain("validation at step 2");
    expect(frame).toMatch(/val\/sokoban\/success_rate +0\.2500/);
    expectFits(frame, 160, 48);
    unmount();
  });

  test("frames follow events as they arrive", async () => {
    const store = storeWith(trainEvents());
    const { lastFrame, unmount } = render(<Dashboard store={store} title="vagen train" size={{ columns: 80, rows: 24 }} />);
    store.dispatch({ type: "phase_progress", step: 3, phase: "rollout", done: 8 });
    store.dispatch({ type: "phase_started", step: 3, phase: "actor_update", total: 4 });
    store.dispatch({ type: "phase_progress", step: 3, phase: "actor_update", done: 1 });
    store.dispatch({ type: "checkpoint_saved", step: 3, path: "runs/t/checkpoints/global_step_3", seconds: 2, bestActor: false });
    await settle();
    expect(lastFrame()).toMatch(/actor_update .*1\/4 micro-batches/);
    expect(lastFrame()).toContain("checkpoint step 3");
    store.dispatch({ type: "run_finished", step: 4, reason: "completed" });
    await settle();
    expect(lastFrame()).toContain("finished: completed");
    unmount();
  });
});

describe("episode viewer", () => {
  const episodes: DashboardEvent[] = ["001_frozenlake_text_seed1_traj0", "000_sokoban_vision_seed0_traj0"].map((path) => ({
    type: "episode_loaded",
    episode: loadEpisode(join(FIXTURE, "train", "rollouts", "step_6", path), 6)!,
  }));

  test("pages episodes and turns: parts, actions, reward split, observation image", async () => {
    const { lastFrame, stdin, unmount } = render(<Dashboard store={storeWith([...trainEvents(), ...episodes])} title="vagen train" size={{ columns: 80, rows: 24 }} />);
    stdin.write(KEYS.tab);
    await settle();
    // The newest episode first, at its initial observation, with its image in half-blocks.
    expect(lastFrame()).toContain("episode 2/2 step 6 sokoban_vision/seed_0");
    expect(lastFrame()).toContain("initial observation (turn 0/2)");
    expect(lastFrame()).toContain("▀");
    stdin.write(KEYS.down);
    await settle();
    let frame = lastFrame()!;
    expect(frame).toContain("turn 1/2");
    expect(frame).toContain("reward 0.1300 = env 0.1000 + world-model 0.0300");
    expect(frame).toContain("actions: down");
    expect(frame).toContain("perception: The box is below me");
    expect(frame).toContain("answer: Down");
    expectFits(frame, 80, 24);
    stdin.write(KEYS.left);
    await settle();
    frame = lastFrame()!;
    expect(frame).toContain("episode 1/2 step 6 frozenlake_text/seed_1");
    expect(frame).toContain("success");
    stdin.write(KEYS.down);
    stdin.write(KEYS.down);
    await settle();
    expect(lastFrame()).toContain("turn 2/2");
    expect(lastFrame()).toContain("think: One more step left reaches the goal.");
    unmount();
  });

  test("a running episode is shown as it plays, its image from pixels in memory", () => {
    const pixels = { width: 2, height: 2, data: new Uint8Array([255, 0, 0, 0, 255, 0, 0, 0, 255, 9, 9, 9]) };
    const running: DashboardEvent = {
      type: "episode_loaded",
      episode: {
        id: "sokoban/seed_3", tag: "sokoban", seed: 3, success: false, reward: 0.1, finishReason: "max_turns", initialText: "", initialImages: [], running: true,
        turns: [{ index: 1, reply: "<answer>Up</answer>", parts: [{ kind: "answer", text: "Up" }], actions: ["up"], reward: 0.1, rewardSplit: { env: 0.1 }, done: false, observationText: "moved", images: [pixels] }],
      },
    };
    const { lastFrame, unmount } = render(<Dashboard store={storeWith([running])} title="vagen eval" size={{ columns: 80, rows: 24 }} initialPane="rollouts" />);
    expect(lastFrame()).toContain("episode 1/1 sokoban/seed_3 running");
    unmount();
  });

  test("no episodes yet", async () => {
    const { lastFrame, stdin, unmount } = render(<Dashboard store={storeWith(trainEvents())} title="vagen train" size={{ columns: 80, rows: 24 }} initialPane="rollouts" />);
    expect(lastFrame()).toContain("no episodes yet");
    stdin.write("3");
    await settle();
    expect(lastFrame()).toContain("latest metrics");
    unmount();
  });
});

describe("details pane", () => {
  test("every metric's latest value, scrolled with ↑/↓", async () => {
    const metrics = Object.fromEntries(Array.from({ length: 30 }, (_, i) => [`perf/m${String(i).padStart(2, "0")}`, i]));
    const store = storeWith([{ type: "metrics", step: 1, metrics }]);
    const { lastFrame, stdin, unmount } = render(<Dashboard store={store} title="t" size={{ columns: 80, rows: 24 }} initialPane="details" />);
    // Body 21 rows: title, 19 metrics, the position line.
    expect(lastFrame()).toMatch(/perf\/m00 +0\n/);
    expect(lastFrame()).toContain("1-19 of 30 (↑/↓ to scroll)");
    for (let i = 0; i < 20; i++) stdin.write(KEYS.down);
    await settle();
    // Scrolling stops at the last full page: 30 - 19 = 11 rows down.
    expect(lastFrame()).toContain("12-30 of 30");
    expect(lastFrame()).not.toMatch(/perf\/m10 /);
    expect(lastFrame()).toMatch(/perf\/m29 +29/);
    stdin.write(KEYS.up);
    await settle();
    expect(lastFrame()).toContain("11-29 of 30");
    expectFits(lastFrame()!, 80, 24);
    unmount();
  });
});

describe("eval view", () => {
  test("per-env progress, running success rate and reward, failures", () => {
    const outcome = (tag: string, seed: number, success: boolean, reward: number, error?: string): DashboardEvent => ({
      type: "eval_episode",
      outcome: { tag, seed, success, cumulative_reward: reward, num_turns: 3, finish_reason: error ? "model_error" : "done", error: error ? { message: error } : undefined },
    });
    const store = storeWith([
      { type: "eval_started", outputDir: "runs/eval", envs: [{ tag: "sokoban_vision", planned: 4 }, { tag: "frozenlake_text", planned: 2 }] },
      { type: "eval_running", running: 2 },
      outcome("sokoban_vision", 0, true, 1.2),
      outcome("sokoban_vision", 1, false, 0.2),
      outcome("frozenlake_text", 0, false, 0, "endpoint answered 503"),
    ]);
    const { lastFrame, unmount } = render(<Dashboard store={store} title="vagen eval" size={{ columns: 80, rows: 24 }} />);
    const frame = lastFrame()!;
    expect(frame).toContain("episodes 3/6");
    expect(frame).toMatch(/sokoban_vision .* 2\/4 +50\.0% +0\.7000 +0/);
    expect(frame).toMatch(/frozenlake_text .* 1\/2 +0\.0% +0 +1/);
    expect(frame).toContain("running 2");
    expect(frame).toContain("frozenlake_text seed 0: model_error: endpoint answered 503");
    expectFits(frame, 80, 24);
    unmount();
  });
});

describe("keys", () => {
  test("q leaves the view", async () => {
    let quit = 0;
    const { stdin, unmount } = render(<Dashboard store={storeWith([])} title="t" size={{ columns: 80, rows: 24 }} onQuit={() => quit++} />);
    stdin.write("q");
    await settle();
    expect(quit).toBe(1);
    unmount();
  });

  test("Ctrl-C in train asks whether to save a checkpoint; the answer runs its choice", async () => {
    const picked: string[] = [];
    const ask = {
      kind: "ask" as const,
      question: "stop training?",
      choices: [
        { key: "s", label: "save a checkpoint and stop", run: () => picked.push("save") },
        { key: "x", label: "stop without saving", run: () => picked.push("stop") },
      ],
    };
    const { lastFrame, stdin, unmount } = render(<Dashboard store={storeWith(trainEvents())} title="vagen train" size={{ columns: 100, rows: 24 }} onInterrupt={ask} />);
    stdin.write(KEYS.ctrlC);
    await settle();
    expect(lastFrame()).toContain("stop training? [s] save a checkpoint and stop  [x] stop without saving  [esc] keep going");
    // Keys other than the choices do nothing while asking.
    stdin.write("q");
    await settle();
    expect(picked).toEqual([]);
    stdin.write("s");
    await settle();
    expect(picked).toEqual(["save"]);
    expect(lastFrame()).not.toContain("stop training?");
    unmount();
  });

  test("Ctrl-C acts at once where the command says so (eval, monitor)", async () => {
    let interrupted = 0;
    const { stdin, unmount } = render(<Dashboard store={storeWith([])} title="t" size={{ columns: 80, rows: 24 }} onInterrupt={{ kind: "now", run: () => interrupted++ }} />);
    stdin.write(KEYS.ctrlC);
    await settle();
    expect(interrupted).toBe(1);
    unmount();
  });
});
