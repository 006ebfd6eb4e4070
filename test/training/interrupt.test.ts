/**
 * Interrupts in every phase: a step interrupted before its updates is abandoned and
 * retaken on resume (the data position is not advanced past it), one interrupted in its
 * updates is finished, one interrupted in validation keeps its step; every case saves
 * the last finished step, and the resumed run's steps equal an uninterrupted run's.
 */
import { describe, expect, test } from "bun:test";
import { existsSync, mkdtempSync, readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { loadTrainConfig } from "../../src/training/config.ts";
import { readTrainerState } from "../../src/training/checkpoint.ts";
import type { TrainEvent, TrainPhase } from "../../src/training/events.ts";
import { runTraining } from "../../src/training/trainer.ts";

const CONFIG = join(import.meta.dir, "digit.yaml");
const STEPS = 3;

function overrides(dir: string, extra: string[] = []): string[] {
  return [`trainer.output_dir=${dir}`, `trainer.total_steps=${STEPS}`, "trainer.save_freq=0", "algorithm.adv_estimator=default_gae", "trainer.dump_batches=true", ...extra];
}

/** metrics.jsonl without the wall-clock entries. */
function metrics(dir: string): Record<string, number>[] {
  return readFileSync(join(dir, "metrics.jsonl"), "utf8")
    .trim()
    .split("\n")
    .map((line) => Object.fromEntries(Object.entries(JSON.parse(line) as Record<string, number>).filter(([k]) => !k.startsWith("timing_s/") && !k.startsWith("perf/"))));
}

/** Runs with an abort fired when `phase` of `step` starts. */
async function interruptAt(dir: string, step: number, phase: TrainPhase, extra: string[] = []) {
  const controller = new AbortController();
  const events: TrainEvent[] = [];
  const result = await runTraining(await loadTrainConfig(CONFIG, overrides(dir, extra)), {
    signal: controller.signal,
    onEvent: (e) => {
      events.push(e);
      if (e.type === "phase_started" && e.step === step && e.phase === phase) controller.abort();
    },
  });
  return { result, events };
}

const root = mkdtempSync(join(tmpdir(), "vagen-interrupt-"));
const straight = join(root, "straight");
let straightRun: Promise<unknown> | undefined;
function straightMetrics(): Promise<Record<string, number>[]> {
  straightRun ??= loadTrainConfig(CONFIG, overrides(straight)).then((c) => runTraining(c));
  return straightRun.then(() => metrics(straight));
}

describe("interrupts", () => {
  test(
    "before the updates: the step is abandoned, step 2 saved with step 3's items still to come, and the resumed run equals an uninterrupted one",
    async () => {
      const dir = join(root, "early");
      const { result, events } = await interruptAt(dir, 3, "old_logprobs");
      expect(result.reason).toBe("interrupted");
      expect(result.step).toBe(2);
      expect(events.some((e) => e.type === "warning" && e.code === "step_abandoned")).toBe(true);
      // the data position is the one after step 2's items: 2 steps x 8 items
      expect(readTrainerState(join(dir, "checkpoints", "step_2")).data).toEqual({ epoch: 0, cursor: 16 });
      expect(existsSync(join(dir, "batches", "step_3.jsonl"))).toBe(false);

      const resumed = await runTraining(await loadTrainConfig(CONFIG, overrides(dir)));
      expect(resumed.step).toBe(STEPS);
      expect(metrics(dir)).toEqual(await straightMetrics());
      expect(readFileSync(join(dir, "batches", "step_3.jsonl"), "utf8")).toBe(readFileSync(join(straight, "batches", "step_3.jsonl"), "utf8"));
    },
    { timeout: 300_000 },
  );

  test(
    "during the actor update: the step is finished and saved",
    async () => {
      const dir = join(root, "update");
      const { result } = await interruptAt(dir, 2, "actor_update");
      expect(result.reason).toBe("interrupted");
      expect(result.step).toBe(2);
      expect(readTrainerState(join(dir, "checkpoints", "step_2")).data).toEqual({ epoch: 0, cursor: 16 });
      const resumed = await runTraining(await loadTrainConfig(CONFIG, overrides(dir)));
      expect(resumed.step).toBe(STEPS);
      expect(metrics(dir)).toEqual(await straightMetrics());
    },
    { timeout: 300_000 },
  );

  test(
    "during validation: the finished step is saved and the run reports the interrupt",
    async () => {
      const dir = join(root, "validation");
      const { result, events } = await interruptAt(dir, 1, "validation", ["trainer.test_freq=1"]);
      expect(result.reason).toBe("interrupted");
      expect(result.step).toBe(1);
      expect(existsSync(join(dir, "checkpoints", "step_1", "state.json"))).toBe(true);
      expect(events.find((e) => e.type === "run_finished")).toMatchObject({ reason: "interrupted", step: 1 });
    },
    { timeout: 300_000 },
  );

  test(
    "during validation before training: nothing finished, nothing saved, an interrupt and not a failure",
    async () => {
      const dir = join(root, "val-before");
      const controller = new AbortController();
      const result = await runTraining(await loadTrainConfig(CONFIG, overrides(dir, ["trainer.val_before_train=true"])), {
        signal: controller.signal,
        onEvent: (e) => {
          if (e.type === "episode_finished" && e.split === "val") controller.abort();
        },
      });
      expect(result.reason).toBe("interrupted");
      expect(result.step).toBe(0);
      expect(existsSync(join(dir, "checkpoints"))).toBe(false);
    },
    { timeout: 300_000 },
  );
});
