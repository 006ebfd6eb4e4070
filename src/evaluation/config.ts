/**
 * The `vagen eval` config. One model backend, and the envs to evaluate keyed by a tag
 * (the tag names the output folder and the summary row, and keys overrides such as
 * `envs.sokoban_text.episodes=4`):
 *
 *   output_dir: runs/eval/sokoban
 *   model: {backend: openai, base_url: http://127.0.0.1:8000/v1, model: Qwen/Qwen2.5-VL-3B-Instruct}
 *   run: {max_concurrent_episodes: 8, resume: true}
 *   envs:
 *     sokoban_text:
 *       name: Sokoban
 *       config: {render_mode: text}
 *       episodes: 16
 *       seed: [10000, 10128, 1]   # VAGEN's seed directive; or seed_start / seeds
 *       harness: concat
 *       max_turns: 5
 */
import { createEnv } from "../../envs/registry.ts";
import { type ConfigKind, type ResolvedConfig, resolveConfig, validateResolved } from "../config/index.ts";
import { VagenError } from "../core/errors.ts";
import { createHarness } from "../harness/registry.ts";
import { checkStateRewardSetup } from "../rewards/setup.ts";
import { resolveEvalPaths } from "./config-paths.ts";
import { EvalConfig } from "./config-schema.ts";
import { buildEvalPlan, type EvalPlan } from "./plan.ts";

export { EnvEvalSpec, EvalConfig, HarnessSpec, RunConfig } from "./config-schema.ts";

/**
 * Load, compose, override, validate and check an eval config file, and plan the run:
 * everything `vagen eval` checks before its first request (it runs the plan), and all
 * that `vagen config show` checks for an eval config.
 */
export async function loadEvalPlan(file: string, overrides: string[]): Promise<EvalPlan> {
  return planResolvedEvalConfig(resolveConfig(file, overrides));
}

/** The checked config of `loadEvalPlan`, for callers that only want the config. */
export async function loadEvalConfig(file: string, overrides: string[]): Promise<EvalConfig> {
  return (await loadEvalPlan(file, overrides)).config;
}

/**
 * The whole validation of a resolved eval config, ending in its plan: the schema, its
 * paths made absolute (config-paths.ts), the plan with its checks across keys
 * (plan.ts), and each env's own config and harness (built once and closed, so a typo
 * such as `dim_rom` fails here, naming its env).
 */
export async function planResolvedEvalConfig(resolved: ResolvedConfig): Promise<EvalPlan> {
  const plan = buildEvalPlan(resolveEvalPaths(validateResolved(EvalConfig, resolved), resolved), resolved.file);
  for (const env of plan.envs) {
    await withKeyContext(`${resolved.file}: key "envs.${env.tag}.harness"`, () => createHarness(env.harness.name, env.harness.options));
    const instance = await withKeyContext(`${resolved.file}: key "envs.${env.tag}": could not create env "${env.name}"`, () => createEnv(env.name, env.config));
    await instance.close();
    if (env.stateReward) {
      const promptFormat = typeof env.config.prompt_format === "string" ? env.config.prompt_format : undefined;
      checkStateRewardSetup({ config: env.stateReward, promptFormat, spec: instance.stateRewardSpec, where: `${resolved.file}: key "envs.${env.tag}.config.state_reward"`, envName: env.name });
    }
  }
  return plan;
}

/** Run `make`, prefixing a failure's message with where in the config it comes from. */
async function withKeyContext<T>(where: string, make: () => Promise<T>): Promise<T> {
  try {
    return await make();
  } catch (err) {
    const message = err instanceof Error ? err.message : String(err);
    throw new VagenError(`${where}: ${message}`, err instanceof VagenError ? err.hint : undefined);
  }
}

/**
 * The eval config kind, for `vagen config show` (registered by the CLI at start-up;
 * see src/cli/main.ts).
 */
export const evalConfigKind: ConfigKind = {
  name: "eval",
  description: "vagen eval: one model backend, envs to evaluate",
  schema: EvalConfig,
  load: async (resolved) => (await planResolvedEvalConfig(resolved)).config,
  detect: (data) => "envs" in data && "model" in data && "output_dir" in data,
};
