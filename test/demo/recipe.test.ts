/**
 * The demo's recipe as configs: the supervised phase is a valid `vagen sft` config and the
 * RL phase a `vagen train` config that passes every check the trainer makes before it
 * loads a model, for GRPO and for PPO, with seeds of the three phases kept apart; and each
 * FrozenLake task's boards come to the policy as one image token a cell.
 */
import { describe, expect, test } from "bun:test";
import * as v from "valibot";
import { OBSERVATION_ONLY_HARNESS } from "../../src/harness/observation-only.ts";
import { CPU_RECIPE, CUDA_RECIPE, demoRecipe, resolveRecipe, SOKOBAN_CPU_RECIPE, SOKOBAN_CUDA_RECIPE, sftConfig, trainConfig } from "../../src/demo/recipe.ts";
import { demoTask, DEMO_FORMATS } from "../../src/demo/task.ts";
import { SokobanEnv } from "../../envs/sokoban/env.ts";
import { checkSftConfig, SftConfig } from "../../src/sft/config.ts";
import { checkTrainConfig, loadTrainConfig } from "../../src/training/config.ts";
import { join } from "node:path";
import { createHarness } from "../../src/harness/registry.ts";
import { FrozenLakeEnv } from "../../envs/frozenlake/env.ts";
import { smartResize } from "../../src/models/image-processor.ts";

const task = demoTask("frozenlake", "vision", CPU_RECIPE.frozenLakeBoard);

describe("demo recipe", () => {
  test("the device picks the recipe", () => {
    expect(demoRecipe("cpu")).toBe(CPU_RECIPE);
    expect(demoRecipe("cuda:1")).toBe(CUDA_RECIPE);
    expect(demoRecipe("cpu", "sokoban")).toBe(SOKOBAN_CPU_RECIPE);
    expect(demoRecipe("cuda", "sokoban")).toBe(SOKOBAN_CUDA_RECIPE);
  });

  test("each FrozenLake task's board render is resized to 28 px a cell: one merged image token per cell", async () => {
    const cases = [
      { task: demoTask("frozenlake", "vision", CPU_RECIPE.frozenLakeBoard), env: new FrozenLakeEnv({ render_mode: "vision", size: 3 }), cells: 3 },
      { task: demoTask("frozenlake", "vision"), env: new FrozenLakeEnv({ render_mode: "vision", size: 4 }), cells: 4 },
    ];
    for (const { task, env, cells } of cases) {
      const image = (await env.reset(0)).obs.images[0]!;
      // The demo's processor: shortest_edge 56 * 56 pixels at least, the task's budget at most.
      expect(smartResize(image.height, image.width, 28, 56 * 56, task.maxPixels)).toEqual([28 * cells, 28 * cells]);
    }
    expect(CPU_RECIPE.frozenLakeBoard).toEqual({ size: 3, p: 0.9 });
  });

  test("the supervised phase is a valid sft config on the solver, in the harness's layout", () => {
    const config = checkSftConfig(v.parse(SftConfig, sftConfig(task, CPU_RECIPE, { baseModelDir: "base", outputDir: "sft", seed: 0, device: "cpu" })));
    expect(config.data.layout).toBe(OBSERVATION_ONLY_HARNESS);
    expect(config.data.solver!.env).toBe("FrozenLake");
    expect(config.data.solver!.seed_start).toBe(task.sftSeedStart);
  });

  for (const algorithm of ["gigpo", "grpo", "ppo"] as const) {
    test(`the RL phase (${algorithm}) passes the trainer's checks`, async () => {
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

  test("a Sokoban room's render is resized to 14 px a cell: one vision patch per cell, 2 x 2 cells per merged token", async () => {
    const task = demoTask("sokoban", "vision", undefined, { levels: SOKOBAN_CPU_RECIPE.sokobanLevels });
    const image = (await new SokobanEnv(task.envConfig).reset(0)).obs.images[0]!;
    expect([image.height, image.width]).toEqual([96, 96]);
    expect(smartResize(image.height, image.width, 28, task.minPixels, task.maxPixels)).toEqual([84, 84]);
    // 28 px a cell: one merged image token a cell
    const big = demoTask("sokoban", "vision", undefined, { levels: SOKOBAN_CPU_RECIPE.sokobanLevels, cellPixels: 28 });
    expect(smartResize(image.height, image.width, 28, big.minPixels, big.maxPixels)).toEqual([168, 168]);
  });

  for (const format of DEMO_FORMATS) {
    for (const [device, base] of [["cpu", SOKOBAN_CPU_RECIPE], ["cuda", SOKOBAN_CUDA_RECIPE]] as const) {
      const recipe = resolveRecipe(base, format);
      const algorithm = format === "wm" ? "bi_level" : "gigpo";
      test(`Sokoban (${format}, ${device}): the phases are a valid sft config and a train config (${algorithm}) that passes the trainer's checks`, async () => {
        const task = demoTask("sokoban", "vision", undefined, { levels: recipe.sokobanLevels, format, maxTurns: recipe.sokobanMaxTurns });
        const sft = checkSftConfig(v.parse(SftConfig, sftConfig(task, recipe, { baseModelDir: "base", outputDir: "sft", seed: 0, device })));
        expect(sft.data.solver!.config.prompt_format).toBe(format === "answer" ? "no_think" : format);
        // Only the world-model format states positions, so only it has noise to set.
        expect(sft.data.solver!.state_noise_prob).toBe(format === "wm" ? recipe.sftStateNoiseProb! : 0);
        const checked = checkTrainConfig(trainConfig(task, recipe, { modelDir: "sft", outputDir: "run", seed: 0, device, steps: 5, algorithm }), "demo");
        expect(checked.useCritic).toBe(format === "wm");
        const env = checked.config.data.train.sokoban!;
        expect(env.max_turns).toBe(recipe.sokobanMaxTurns!);
        if (format === "wm") {
          // Both world-model sections are rewarded, by the env's exact reader (no judge).
          expect(env.config.state_reward).toMatchObject({ state_estimation: { enable: true }, transition_prediction: { enable: true }, scorer: "exact" });
          expect(checked.config.algorithm.adv_estimator).toBe("bi_level_gae");
        } else {
          expect(env.config.state_reward).toBeUndefined();
        }
      });
    }
  }

  test("Sokoban's CPU recipe trains the vision tower in both phases and pays RL no per-turn format reward, in training and validation", () => {
    const recipe = SOKOBAN_CPU_RECIPE;
    const task = demoTask("sokoban", "vision", undefined, { levels: recipe.sokobanLevels, format: "wm", maxTurns: recipe.sokobanMaxTurns });
    expect(sftConfig(task, recipe, { baseModelDir: "base", outputDir: "sft", seed: 0, device: "cpu" }).train.freeze_vision_tower).toBe(false);
    const config = trainConfig(task, recipe, { modelDir: "sft", outputDir: "run", seed: 0, device: "cpu", steps: 100, algorithm: "bi_level" });
    expect(config.actor.freeze_vision_tower).toBe(false);
    for (const env of [config.data.train.sokoban!, config.data.val.sokoban!]) {
      expect(env.config.format_reward).toBe(0);
      // the env keys of the RL phase sit beside the task's and the wm format's state rewards
      expect(env.config.min_solution_steps).toEqual([1, 3]);
      expect(env.config.state_reward).toBeDefined();
    }
    expect(config.trainer.test_freq).toBe(25);
    expect(config.rollout.val_kwargs).toEqual({ temperature: 0, top_p: 1, n: 1 });
  });

  test("Sokoban's CUDA recipe: the wm format's own state rewards and RL phase, under what a caller overrides", () => {
    const cuda = SOKOBAN_CUDA_RECIPE;
    expect(resolveRecipe(cuda, "answer")).toEqual(cuda);
    const wm = resolveRecipe(cuda, "wm");
    expect([wm.sftEpochs, wm.stateReward, wm.rlPpoEpochs, wm.rlSteps, wm.rlSampling]).toEqual([4, 0.02, 2, 100, { temperature: 0.7, top_p: 0.95 }]);
    expect([cuda.sftEpochs, cuda.stateReward, cuda.rlPpoEpochs, cuda.rlSteps, cuda.rlSampling]).toEqual([4, 0.1, 4, 150, undefined]);
    // The warm start runs its four epochs to the end (no probe, no loss threshold), on
    // demonstrations of which 70% come from the solver that walks through the box.
    expect(cuda.sftStopAtSuccess).toBeUndefined();
    const sft = sftConfig(demoTask("sokoban", "vision", undefined, { format: "wm" }), wm, { baseModelDir: "base", outputDir: "sft", seed: 0, device: "cuda" });
    expect([sft.train.stop_below_loss, sft.train.epochs, sft.data.solver?.careless_episode_prob]).toEqual([0, 4, 0.7]);
    // A caller's override wins over the format's.
    expect(resolveRecipe(cuda, "wm", { stateReward: 0.05, rlSteps: 7 })).toMatchObject({ stateReward: 0.05, rlSteps: 7, sftEpochs: 4 });
    const task = demoTask("sokoban", "vision", undefined, { levels: cuda.sokobanLevels, format: "wm", maxTurns: cuda.sokobanMaxTurns });
    const config = trainConfig(task, wm, { modelDir: "sft", outputDir: "run", seed: 0, device: "cuda", steps: 150, algorithm: "gigpo" });
    expect(config.data.train.sokoban!.config.state_reward).toMatchObject({ state_estimation: { reward: 0.02 }, transition_prediction: { reward: 0.02 }, aggregation: "per_turn" });
    expect(config.data.train.sokoban!.config.format_reward).toBe(0);
    expect(config.actor.freeze_vision_tower).toBe(false);
    expect([config.data.train_batch_size, config.algorithm.step_advantage_w, config.actor.optim.lr, config.trainer.test_freq]).toEqual([32, 3, 2e-4, 25]);
    // Sampled as the paper did: the engine's log-probs are not the trainer's old ones then.
    expect(config.rollout).toMatchObject({ temperature: 0.7, top_p: 0.95, use_engine_logprobs: false });
    expect(config.actor.ppo_epochs).toBe(2);
    // episode_mean divides each turn's state rewards by the episode's turns.
    const mean = trainConfig(task, { ...wm, stateRewardAggregation: "episode_mean" }, { modelDir: "sft", outputDir: "run", seed: 0, device: "cuda", steps: 150, algorithm: "gigpo" });
    expect(mean.data.train.sokoban!.config.state_reward).toMatchObject({ aggregation: "episode_mean" });
  });

  const examples = [
    ["sokoban-demo-answer", SOKOBAN_CPU_RECIPE, "answer", "cpu"],
    ["sokoban-demo-cuda", SOKOBAN_CUDA_RECIPE, "free_think", "cuda"],
    ["sokoban-demo-wm", SOKOBAN_CUDA_RECIPE, "wm", "cuda"],
  ] as const;
  for (const [name, base, format, device] of examples) {
    test(`examples/train/${name}.yaml is the Sokoban ${device} recipe's RL phase (${format})`, async () => {
      const recipe = resolveRecipe(base, format);
      const task = demoTask("sokoban", "vision", undefined, { levels: recipe.sokobanLevels, format, maxTurns: recipe.sokobanMaxTurns });
      const demo = trainConfig(task, recipe, { modelDir: "sft", outputDir: "run", seed: 0, device, steps: recipe.rlSteps, algorithm: "gigpo" });
      const example = (await loadTrainConfig(join(import.meta.dir, `../../examples/train/${name}.yaml`), [])).config;
      expect(example.model.device).toBe(device);
      expect(example.data.train).toEqual(demo.data.train);
      expect(example.data.val).toEqual(demo.data.val);
      for (const key of ["train_batch_size", "max_prompt_length", "max_response_length"] as const) expect(example.data[key]).toBe(demo.data[key]);
      expect(example.algorithm).toEqual(demo.algorithm);
      expect(example.actor).toEqual(demo.actor);
      expect(example.rollout).toEqual(demo.rollout);
      for (const key of ["total_steps", "test_freq", "harness", "val_before_train"] as const) expect(example.trainer[key]).toEqual(demo.trainer[key]);
    });
  }

  test("observation_history: every phase runs it, and a row holds the whole episode", () => {
    const task = demoTask("sokoban", "vision", undefined, { levels: SOKOBAN_CPU_RECIPE.sokobanLevels, format: "answer", maxTurns: 6, harness: "observation_history" });
    expect(sftConfig(task, SOKOBAN_CPU_RECIPE, { baseModelDir: "base", outputDir: "sft", seed: 0, device: "cpu" }).data.layout).toBe("observation_history");
    const config = trainConfig(task, SOKOBAN_CPU_RECIPE, { modelDir: "sft", outputDir: "run", seed: 0, device: "cpu", steps: 20, algorithm: "gigpo" });
    expect(config.trainer.harness).toBe("observation_history");
    // By hand: an 84 x 84 room (14 px a cell) within a budget of 84 * 84 + 14 * 12 + 1 =
    // 7225 pixels, at most ceil(7225 / 784) = 10 merged image tokens; six turns of a
    // 10-token answer, that image and 16 tokens of framing: 6 * (10 + 10 + 16) = 216.
    expect(config.data.max_response_length).toBe(216);
    // A row per turn: twice the answer's limit, at least 64.
    expect(trainConfig({ ...task, harness: OBSERVATION_ONLY_HARNESS }, SOKOBAN_CPU_RECIPE, { modelDir: "sft", outputDir: "run", seed: 0, device: "cpu", steps: 20, algorithm: "gigpo" }).data.max_response_length).toBe(64);
  });

  test("recipe overrides: sampled validation, a critic warm-up, an entropy bonus, clip-higher", () => {
    const task = demoTask("sokoban", "vision", undefined, { levels: SOKOBAN_CPU_RECIPE.sokobanLevels, format: "answer", maxTurns: 6 });
    const plain = trainConfig(task, SOKOBAN_CPU_RECIPE, { modelDir: "sft", outputDir: "run", seed: 0, device: "cpu", steps: 20, algorithm: "ppo" });
    expect(plain.actor.entropy_coeff).toBe(0);
    expect(plain.actor.clip_ratio_high ?? undefined).toBeUndefined();
    const recipe = { ...SOKOBAN_CPU_RECIPE, valSampling: { temperature: 0.7, top_p: 0.95 }, rlCriticWarmup: 10, rlEntropyCoeff: 0.01, rlClipRatioHigh: 0.28 };
    const config = trainConfig(task, recipe, { modelDir: "sft", outputDir: "run", seed: 0, device: "cpu", steps: 20, algorithm: "ppo" });
    expect(config.rollout.val_kwargs).toEqual({ temperature: 0.7, top_p: 0.95, n: 1 });
    expect(config.trainer.critic_warmup).toBe(10);
    expect(config.actor.entropy_coeff).toBe(0.01);
    expect([config.actor.clip_ratio, config.actor.clip_ratio_high]).toEqual([0.2, 0.28]);
  });

  test("several PPO epochs a step take the old log-probs from a trainer forward", () => {
    const task = demoTask("sokoban", "vision", undefined, { levels: SOKOBAN_CPU_RECIPE.sokobanLevels, format: "answer", maxTurns: 6 });
    const once = trainConfig(task, SOKOBAN_CPU_RECIPE, { modelDir: "sft", outputDir: "run", seed: 0, device: "cpu", steps: 20, algorithm: "gigpo" });
    expect(once.actor.ppo_epochs).toBe(1);
    expect(once.rollout.use_engine_logprobs).toBe(true);
    const four = trainConfig(task, { ...SOKOBAN_CPU_RECIPE, rlPpoEpochs: 4 }, { modelDir: "sft", outputDir: "run", seed: 0, device: "cpu", steps: 20, algorithm: "gigpo" });
    expect(four.actor.ppo_epochs).toBe(4);
    expect(four.critic.ppo_epochs).toBe(4);
    expect(four.rollout.use_engine_logprobs).toBe(false);
  });
});
