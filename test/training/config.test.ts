/**
 * The train config: defaults as VAGEN's, and every config that cannot work fails in
 * loadTrainConfig (before any model is loaded), naming the key.
 */
import { describe, expect, test } from "bun:test";
import { readdirSync } from "node:fs";
import { join } from "node:path";
import { loadTrainConfig } from "../../src/training/config.ts";

const TINY = join(import.meta.dir, "../../examples/train/tiny-cpu.yaml");

async function failure(overrides: string[]): Promise<string> {
  try {
    await loadTrainConfig(TINY, overrides);
  } catch (err) {
    return (err as Error).message;
  }
  throw new Error(`expected ${overrides.join(" ")} to be refused`);
}

describe("train config", () => {
  test("tiny-cpu.yaml loads with VAGEN's defaults where it sets nothing", async () => {
    const { config, estimator, useCritic, useReference } = await loadTrainConfig(TINY);
    expect(estimator.spec.name).toBe("default_gae");
    expect(useCritic).toBe(true); // critic.enable: null -> on for a critic estimator
    expect(useReference).toBe(false);
    expect(config.algorithm.gamma ?? 1).toBe(1);
    expect(config.actor.clip_ratio).toBe(0.2);
    expect(config.actor.clip_ratio_c).toBe(3);
    expect(config.actor.grad_clip).toBe(1);
    expect(config.actor.optim.weight_decay).toBe(0.01);
    expect(config.critic.cliprange_value).toBe(0.5);
    expect(config.rollout.val_kwargs).toEqual({ temperature: 0, top_p: 1, n: 1 });
    expect(config.trainer.resume).toBe("auto");
    expect(config.model.model_dir.startsWith("/")).toBe(true);
  });

  test("any estimator from the command line", async () => {
    const grpo = await loadTrainConfig(TINY, ["algorithm.adv_estimator=grpo"]);
    expect(grpo.useCritic).toBe(false);
    const bi = await loadTrainConfig(TINY, ["algorithm.adv_estimator=bi_level_gae", "algorithm.gamma_turn=0.9"]);
    expect(bi.estimator.params.gamma_turn).toBe(0.9);
    expect(bi.useCritic).toBe(true);
  });

  test("a cross-key error names the command line when an override set the key, the file otherwise", async () => {
    expect(await failure(["actor.ppo_micro_batch_size=3"])).toContain('command line (actor.ppo_micro_batch_size=3): key "actor.ppo_micro_batch_size"');
    // the key that is wrong was set by the file, though an override made it so
    expect(await failure(["data.train_batch_size=3"])).toContain('tiny-cpu.yaml: key "actor.ppo_mini_batch_size"');
  });

  test("a batch that does not divide into mini-batches names the key", async () => {
    expect(await failure(["actor.ppo_mini_batch_size=3", "data.train_batch_size=4"])).toContain('key "actor.ppo_mini_batch_size"');
    expect(await failure(["actor.ppo_micro_batch_size=3"])).toContain('key "actor.ppo_micro_batch_size"');
  });

  test("a response length too small for one turn names the key", async () => {
    expect(await failure(["data.max_response_length=8"])).toContain('key "data.train.frozenlake.response_length_per_turn"');
  });

  test("an unknown estimator names the key and the closest name", async () => {
    const msg = await failure(["algorithm.adv_estimator=grop"]);
    expect(msg).toContain('key "algorithm.adv_estimator"');
    expect(msg).toContain("grpo");
  });

  test("a critic estimator with the critic off names critic.enable", async () => {
    expect(await failure(["critic.enable=false"])).toContain('key "critic.enable"');
  });

  test("unknown keys, bad values and bad env configs are refused", async () => {
    expect(await failure(["trainer.sav_freq=3"])).toContain('unknown key "trainer.sav_freq"');
    expect(await failure(["actor.clip_ratio_c=0.5"])).toContain('key "actor.clip_ratio_c"');
    expect(await failure(["data.train.frozenlake.config.render_mod=text"])).toContain('key "data.train.frozenlake"');
    expect(await failure(["data.train.frozenlake.seed=[1,10,1]"])).toContain('key "data.train.frozenlake.seed"');
    expect(await failure(["data.train_batch_size=128", "actor.ppo_mini_batch_size=2", "critic.ppo_mini_batch_size=2"])).toContain('key "data.train_batch_size"');
    expect(await failure(["rollout.use_engine_logprobs=true", "actor.ppo_epochs=2"])).toContain('key "rollout.use_engine_logprobs"');
  });
});

describe("the example recipes", () => {
  const dir = join(import.meta.dir, "../../examples/train");
  const recipes = readdirSync(dir).filter((f) => f.endsWith(".yaml") && !f.startsWith("_"));
  test("values the trainer would refuse only after a rollout are refused here, naming the key", async () => {
    // the adaptive KL controller divides by target_kl: the config and the controller share one schema
    expect(await failure(["algorithm.kl_ctrl.type=adaptive", "algorithm.kl_ctrl.target_kl=0"])).toContain("algorithm.kl_ctrl.target_kl");
    // the training log-probs divide by the temperature (validation may be greedy)
    expect(await failure(["rollout.temperature=0"])).toContain("rollout.temperature");
    expect((await loadTrainConfig(TINY, ["rollout.val_kwargs.temperature=0"])).config.rollout.val_kwargs.temperature).toBe(0);
    // verl's "full" KL needs both models' whole distributions, which the trainer does not keep
    expect(await failure(["algorithm.kl_penalty=full"])).toContain("algorithm.kl_penalty");
    expect(await failure(["actor.use_kl_loss=true", "actor.kl_loss_type=full"])).toContain("actor.kl_loss_type");
    expect(await failure(["algorithm.rollout_correction.rollout_is=row"])).toContain("algorithm.rollout_correction.rollout_is");
  });

  test("rollout correction is on by default, token-level with threshold 2", async () => {
    const { config } = await loadTrainConfig(TINY);
    expect(config.algorithm.rollout_correction).toEqual({ rollout_is: "token", rollout_is_threshold: 2, rollout_rs: null, rollout_rs_threshold: 2, rollout_rs_threshold_lower: null });
    expect(config.actor.loss_scale_factor).toBeNull();
  });

  test("there is one for each VAGEN recipe", () => {
    expect(recipes.length).toBeGreaterThanOrEqual(11);
  });
  for (const file of recipes) {
    test(`${file} passes every check`, async () => {
      const { config, estimator } = await loadTrainConfig(join(dir, file));
      expect(config.trainer.output_dir.startsWith("/")).toBe(true);
      expect(estimator.spec.name).toBe(config.algorithm.adv_estimator);
    });
  }
});
