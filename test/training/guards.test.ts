/**
 * Guards: the watchdog names the stalled phase; a failed checkpoint write leaves earlier
 * checkpoints intact; trouble metrics become warnings.
 */
import { describe, expect, test } from "bun:test";
import { existsSync, mkdtempSync, readdirSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import * as torch from "../../src/torch/index.ts";
import { latestCheckpoint, listCheckpoints, saveCheckpoint, type TrainerState } from "../../src/training/checkpoint.ts";
import { troubleSigns } from "../../src/training/trainer.ts";
import { Watchdog } from "../../src/training/watchdog.ts";

const state = (step: number): TrainerState => ({ step, data: { epoch: 0, cursor: step }, actorSchedulerStep: step, klCoef: 0, bestValReward: null, torchRngState: "" });

describe("guards", () => {
  test("the watchdog ends a phase that makes no progress, naming it and what it waited for", async () => {
    const dog = new Watchdog(0.2);
    const hung = new Promise<never>(() => {});
    await expect(dog.guard("rollout", "episodes to finish", () => hung)).rejects.toThrow('watchdog: phase "rollout" made no progress for 0 s (trainer.watchdog_s = 0.2); it was waiting for episodes to finish');
    // progress keeps it quiet
    const ticking = dog.guard("rollout", "episodes", async () => {
      for (let i = 0; i < 6; i++) {
        await Bun.sleep(60);
        dog.touch();
      }
      return "done";
    });
    expect(await ticking).toBe("done");
    dog.dispose();
  });

  test("a checkpoint write that fails (a full disk) leaves the earlier checkpoints as they were", () => {
    const root = mkdtempSync(join(tmpdir(), "vagen-ckpt-"));
    const w = torch.keep(torch.tensor([1, 2, 3], [3]));
    const part = { weights: new Map([["w", w]]), optimizer: { tensors: {}, metadata: {} } };
    saveCheckpoint(root, { actor: part }, state(1), 2);
    const broken = torch.tensor([4], [1]);
    broken.dispose(); // writing a freed tensor fails mid-write, as a full disk would
    expect(() => saveCheckpoint(root, { actor: { weights: new Map([["w", w], ["x", broken]]), optimizer: { tensors: {}, metadata: {} } } }, state(2), 2)).toThrow("could not save checkpoint");
    expect(listCheckpoints(root).map((c) => c.step)).toEqual([1]);
    expect(latestCheckpoint(root)).toBe(join(root, "step_1"));
    expect(readdirSync(root)).toEqual(["step_1"]); // no temporary left behind
    expect(existsSync(join(root, "step_1", "actor", "model.safetensors"))).toBe(true);
    // keep_checkpoints prunes the oldest once newer ones are in place
    saveCheckpoint(root, { actor: part }, state(2), 2);
    saveCheckpoint(root, { actor: part }, state(3), 2);
    expect(listCheckpoints(root).map((c) => c.step)).toEqual([2, 3]);
    w.dispose();
  });

  test("trouble metrics become warnings", () => {
    expect(troubleSigns({ "rollout/logprob_mismatch": 0.001, "rollout/degenerate_rate": 0.1 })).toEqual([]);
    expect(troubleSigns({ "rollout/logprob_mismatch": 0.2, "rollout/degenerate_rate": 0.9, "response_length/clip_ratio": 1 }).map((w) => w.code)).toEqual(["logprob_mismatch", "degenerate_responses", "truncation"]);
  });
});

describe("an env that throws", () => {
  test(
    "fails the run and leaves the last good checkpoint intact",
    async () => {
      const { loadTrainConfig } = await import("../../src/training/config.ts");
      const { runTraining } = await import("../../src/training/trainer.ts");
      const { DigitEnv } = await import("./digit-env.ts");
      const dir = mkdtempSync(join(tmpdir(), "vagen-throw-"));
      let resets = 0;
      const broken = new DigitEnv();
      broken.step = async () => {
        throw new Error("the simulator crashed");
      };
      // step 1's 32 episodes play; every later episode's env throws
      const createEnv = async () => (resets++ < 32 ? new DigitEnv() : broken);
      const checked = await loadTrainConfig(join(import.meta.dir, "digit.yaml"), [`trainer.output_dir=${dir}`, "trainer.total_steps=3", "trainer.save_freq=1", "algorithm.adv_estimator=grpo"]);
      await expect(runTraining(checked, { createEnv })).rejects.toThrow("no training rows");
      expect(listCheckpoints(join(dir, "checkpoints")).map((c) => c.step)).toEqual([1]);
      expect(readdirSync(join(dir, "checkpoints"))).toEqual(["step_1"]);
    },
    { timeout: 300_000 },
  );
});
