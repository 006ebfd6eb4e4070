/**
 * kill -9 in the middle of a step, resume, and the run goes on exactly as an
 * uninterrupted one: same metrics to the last digit (timings aside), on the CPU, with the
 * same seed. The killed run is a real `vagen train` process.
 */
import { describe, expect, test } from "bun:test";
import { spawn } from "bun";
import * as torch from "../../src/torch/index.ts";
import { existsSync, mkdtempSync, readdirSync, readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { loadTrainConfig } from "../../src/training/config.ts";
import { runTraining } from "../../src/training/trainer.ts";

const CONFIG = join(import.meta.dir, "digit.yaml");
const MAIN = join(import.meta.dir, "../../src/cli/main.ts");
const STEPS = 4;

function overrides(dir: string): string[] {
  return [`trainer.output_dir=${dir}`, `trainer.total_steps=${STEPS}`, "trainer.save_freq=1", "trainer.keep_checkpoints=2", "algorithm.adv_estimator=default_gae", "trainer.dump_batches=true"];
}

/** metrics.jsonl without the wall-clock entries. */
function metrics(dir: string): Record<string, number>[] {
  return readFileSync(join(dir, "metrics.jsonl"), "utf8")
    .trim()
    .split("\n")
    .map((line) => Object.fromEntries(Object.entries(JSON.parse(line) as Record<string, number>).filter(([k]) => !k.startsWith("timing_s/") && !k.startsWith("perf/"))));
}

describe("resume after kill -9", () => {
  test(
    "the resumed run's steps equal an uninterrupted run's",
    async () => {
      const root = mkdtempSync(join(tmpdir(), "vagen-resume-"));
      const straight = join(root, "straight");
      await runTraining(await loadTrainConfig(CONFIG, overrides(straight)));

      const killed = join(root, "killed");
      // The child's steps 1-2 are compared with this process's: the same thread count, so
      // the same summation order and bit-equal metrics.
      const child = spawn(["bun", MAIN, "train", CONFIG, ...overrides(killed)], { stderr: "pipe", stdout: "ignore", env: { ...process.env, OMP_NUM_THREADS: String(torch.torchInfo().threads) } });
      let log = "";
      const decoder = new TextDecoder();
      for await (const chunk of child.stderr) {
        log += decoder.decode(chunk);
        // mid-step 3: its rollout is done, its forward passes and updates are not
        if (log.includes(`[step 3/${STEPS}] rollout`)) {
          child.kill(9);
          break;
        }
      }
      await child.exited;
      expect(child.signalCode).toBe("SIGKILL");
      expect(existsSync(join(killed, "checkpoints", "step_2", "state.json"))).toBe(true);
      expect(existsSync(join(killed, "checkpoints", "step_3"))).toBe(false);

      const result = await runTraining(await loadTrainConfig(CONFIG, overrides(killed)));
      expect(result.step).toBe(STEPS);
      expect(metrics(killed)).toEqual(metrics(straight));
      // the newest keep_checkpoints checkpoints stay, nothing half-written is left
      expect(readdirSync(join(killed, "checkpoints")).sort()).toEqual(["step_3", "step_4"]);
      expect(readFileSync(join(killed, "batches", "step_3.jsonl"), "utf8")).toBe(readFileSync(join(straight, "batches", "step_3.jsonl"), "utf8"));
    },
    { timeout: 600_000 },
  );
});
