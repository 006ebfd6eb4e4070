/**
 * The demo's recipe as configs: the supervised phase is a valid `vagen sft` config and the
 * RL phase a `vagen train` config that passes every check the trainer makes before it
 * loads a model, for GRPO and for PPO, with seeds of the three phases kept apart.
 */
import { describe, expect, test } from "bun:test";
import * as v from "valibot";
import { registerObservationOnlyHarness, OBSERVATION_ONLY_HARNESS } from "../../src/demo/harness.ts";
import { CPU_RECIPE, CUDA_RECIPE, demoRecipe, sftConfig, trainConfig } from "../../src/demo/recipe.ts";
import { demoTask } from "../../src/demo/task.ts";
import { checkSftConfig, SftConfig } from "../../src/sft/config.ts";
import { checkTrainConfig } from "../../src/training/config.ts";
import { createHarness } from "../../src/harness/registry.ts";

const task = demoTask("frozenlake", "vision");

describe("demo recipe", () => {
  test("the device picks the recipe", () => {
    expect(demoRecipe("cpu")).toBe(CPU_RECIPE);
    expect(demoRecipe("cuda:1")).toBe(CUDA_RECIPE);
  });

  test("the supervised phase is a valid sft config on the solver, in the harness's layout", () => {
    const config = checkSftConfig(v.parse(SftConfig, sftConfig(task, CPU_RECIPE, { baseModelDir: "base", outputDir: "sft", seed: 0, device: "cpu" })));
    expect(config.data.layout).toBe(OBSERVATION_ONLY_HARNESS);
    expect(config.data.solver!.env).toBe("FrozenLake");
    expect(config.data.solver!.seed_start).toBe(task.sftSeedStart);
  });

  for (const algorithm of ["gigpo", "grpo", "ppo"] as const) {
    test(`the RL phase (${algorithm}) passes the trainer's checks`, async () => {
      registerObservationOnlyHarness();
      const checked = checkTrainConfig(trainConfig(task, CPU_RECIPE, { modelDir: "sft", outputDir: "run", seed: 0, device: "cpu", steps: 5, algorithm }), "demo");
      expect(checked.useCritic).toBe(algorithm === "ppo");
      expect(checked.useReference).toBe(false);
      const { trainer, data } = checked.config;
      expect(trainer.val_before_train).toBe(true);
      expect(trainer.total_steps).toBe(5);
      expect((await createHarness(trainer.harness)).rowPerTurn).toBe(true);
      // Training, supervised and validation boards never overlap.
      const [lo, hi] = data.train.frozenlake!.seed as number[];
      const [vlo, vhi] = data.val.frozenlake!.seed as number[];
      expect(hi! < vlo! || vhi! < lo!).toBe(true);
      expect(task.sftSeedStart > hi! && task.sftSeedStart + CPU_RECIPE.sftEpisodes < vlo!).toBe(true);
    });
  }
});
