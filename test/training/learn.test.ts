/**
 * Proof that it learns: the tiny fixture policy on DigitEnv (reply with a digit), GRPO
 * and PPO with a critic, fixed seed, CPU. Success starts near 0 (a few of the 368 tokens
 * are digits) and greedy validation after 20 steps is at least 0.9.
 */
import { describe, expect, test } from "bun:test";
import { mkdtempSync, readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { loadTrainConfig } from "../../src/training/config.ts";
import { runTraining } from "../../src/training/trainer.ts";

const CONFIG = join(import.meta.dir, "digit.yaml");

async function train(estimator: string): Promise<Record<string, number>[]> {
  const dir = mkdtempSync(join(tmpdir(), `vagen-learn-${estimator}-`));
  await runTraining(await loadTrainConfig(CONFIG, [`trainer.output_dir=${dir}`, `algorithm.adv_estimator=${estimator}`, "trainer.total_steps=20", "trainer.test_freq=20"]));
  return readFileSync(join(dir, "metrics.jsonl"), "utf8").trim().split("\n").map((l) => JSON.parse(l) as Record<string, number>);
}

describe("the tiny policy learns DigitEnv", () => {
  for (const estimator of ["grpo", "default_gae"]) {
    test(
      estimator,
      async () => {
        const steps = await train(estimator);
        expect(steps[0]!["train/digit/success_rate"]).toBeLessThanOrEqual(0.2);
        const last = steps.at(-1)!;
        expect(last.step).toBe(20);
        expect(last["val/digit/success_rate"]).toBeGreaterThanOrEqual(0.9);
        if (estimator === "default_gae") expect(last["critic/vf_loss"]).toBeDefined();
      },
      { timeout: 600_000 },
    );
  }
});
