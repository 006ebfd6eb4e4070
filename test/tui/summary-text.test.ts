import { expect, test } from "bun:test";
import { join } from "node:path";
import { RunDirReader } from "../../src/tui/run-dir.ts";
import { initialState, reduce } from "../../src/tui/state.ts";
import { summaryText } from "../../src/tui/summary-text.ts";

const FIXTURE = join(import.meta.dir, "..", "fixtures", "run-dir");
const summaryOf = (dir: string) => summaryText(new RunDirReader(dir).poll().reduce((s, e) => reduce(s, e, 0), initialState()));

test("a training run: metric table with min, max and trend; throughput; validation; checkpoints; episodes", () => {
  const text = summaryOf(join(FIXTURE, "train"));
  // ETA from timing_s/step (31..36 s, mean 33.5 s) times the 4 steps left: 134 s.
  expect(text).toContain(`train run ${join(FIXTURE, "train")}: step 6/10, ETA 2m14s`);
  // critic/score/mean went 0.1, 0.2, ..., 0.6: a steady climb; min, max and trend cover steps 1-6.
  expect(text).toContain("metric                   latest      min     max  steps  trend over those steps");
  expect(text).toContain("reward                   0.6000   0.1000  0.6000    1-6  ▁▂▄▅▇█");
  expect(text).toContain("entropy                  1.4000   1.4000  1.9000    1-6  █▇▅▄▂▁");
  // Validations at steps 3 and 6: mean of val/<env>/reward, (0.15 + 0.3) / 2 and (0.3 + 0.6) / 2.
  expect(text).toContain("val reward               0.4500   0.2250  0.4500    3-6  ▁█");
  expect(text).toContain("validation mean reward by step: 3: 0.2250, 6: 0.4500");
  expect(text).toContain("success sokoban_vision   0.3000   0.0500  0.3000");
  expect(text).toContain("throughput 1260.0 tokens/s, GPU memory 3.5000 GB");
  expect(text).toContain("validation at step 6:");
  expect(text).toContain("val/frozenlake_text/success_rate  0.4800");
  expect(text).toContain("checkpoints: step 3, step 6");
  expect(text).toContain("episodes loaded: 4 (rollouts of step 5, 6), 2 successful");
  // Plain text: no escape sequences for scripts to strip.
  expect(text).not.toContain("\x1b");
});

test("an eval run: the per-env table", () => {
  const text = summaryOf(join(FIXTURE, "eval"));
  expect(text).toContain("eval run");
  expect(text).toMatch(/env +done +success +mean reward +errors\nsokoban_vision +2\/2 +0\.0% +0 +0\nfrozenlake_text +2\/2 +0\.0% +0 +0/);
});
