/**
 * `vagen eval RUN_DIR`: a training run's best actor (else its newest checkpoint) on the
 * run's validation envs, with the run's harness, validation sampling and seeds; a folder
 * that is not a run, or a run with nothing to evaluate, gets one line naming it.
 */
import { describe, expect, test } from "bun:test";
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import YAML from "yaml";
import { spawn } from "bun";
import { isTrainRunDir, prepareRunEvaluation } from "../../src/cli/commands/eval-run.ts";
import { loadEvalPlan } from "../../src/evaluation/config.ts";
import { loadTrainConfig } from "../../src/training/config.ts";
import { runTraining } from "../../src/training/trainer.ts";

const TINY = join(import.meta.dir, "../../examples/train/tiny-cpu.yaml");
const MAIN = join(import.meta.dir, "../../src/cli/main.ts");

describe("vagen eval RUN_DIR", () => {
  test(
    "evaluates the best actor on the run's validation envs as the trainer validates",
    async () => {
      const run = mkdtempSync(join(tmpdir(), "vagen-eval-run-"));
      await runTraining(await loadTrainConfig(TINY, [`trainer.output_dir=${run}`, "trainer.total_steps=2", "trainer.harness=no_concat"]));
      expect(isTrainRunDir(run)).toBe(true);
      const prepared = prepareRunEvaluation(run);
      expect(prepared.weights).toBe(join(run, "best_actor"));
      expect(existsSync(join(run, "eval", "best_actor", "model", "config.json"))).toBe(true);
      const written = YAML.parse(readFileSync(prepared.config, "utf8"));
      expect(written.model.sampling).toEqual({ temperature: 0, top_p: 1 });
      const plan = await loadEvalPlan(prepared.config, []);
      // tiny-cpu's data.val: 2 FrozenLake boards, seeds [10001, 10002]
      expect(plan.episodes.map((e) => e.seed).sort()).toEqual([10001, 10002]);
      expect(plan.episodes.every((e) => e.env.tag === "frozenlake")).toBe(true);
      expect(plan.config.envs.frozenlake!.harness).toBe("no_concat");
      expect(plan.config.envs.frozenlake!.sampling.max_tokens).toBe(12);

      // without best_actor the newest checkpoint is taken; a second run re-exports in place
      rmSync(join(run, "best_actor"), { recursive: true });
      expect(prepareRunEvaluation(run).weights).toBe(join(run, "checkpoints", "step_2"));
      expect(prepareRunEvaluation(run).weights).toBe(join(run, "checkpoints", "step_2"));
    },
    { timeout: 300_000 },
  );

  test("a folder that is not a run, or a run with nothing to evaluate, is one line naming it", async () => {
    const dir = mkdtempSync(join(tmpdir(), "vagen-eval-folder-"));
    const child = spawn(["bun", MAIN, "eval", dir], { stderr: "pipe", stdout: "ignore" });
    const err = await new Response(child.stderr).text();
    expect(await child.exited).not.toBe(0);
    expect(err).toContain(`${dir}: a folder, expected an eval config YAML or a folder vagen train wrote`);
    expect(err).not.toContain("EISDIR");

    const empty = mkdtempSync(join(tmpdir(), "vagen-eval-empty-run-"));
    const config = (await loadTrainConfig(TINY, [`trainer.output_dir=${empty}`])).config;
    mkdirSync(empty, { recursive: true });
    await Bun.write(join(empty, "config.yaml"), YAML.stringify(config));
    expect(() => prepareRunEvaluation(empty)).toThrow(/has no best_actor\/ and no complete checkpoint/);
  });
});
