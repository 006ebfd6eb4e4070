/**
 * What main's `build_env` checks before a run starts with world-model rewards on, and the
 * system-prompt addition its wrapper makes. Every refusal names the config key.
 */
import { VagenError } from "../core/errors.ts";
import type { Env, StateRewardSpec } from "../../envs/_common/types.ts";
import { WM_FORMAT } from "../../envs/_common/wm-format.ts";
import { enabledSections, needsJudge, type StateRewardConfig } from "./config.ts";

/** Prompt formats that carry the world-model sections (main: `free_wm` is an alias of `wm_think`). */
export const STATE_REWARD_FORMATS = ["wm", "wm_think", "free_wm"] as const;

export interface StateRewardSetup {
  config: StateRewardConfig;
  /** The env's `prompt_format`; absent counts as `wm`, as in main. */
  promptFormat?: string;
  /** The env's declared spec (`env.stateRewardSpec`). */
  spec?: StateRewardSpec;
  /** Where the block sits, for messages: e.g. `envs.sokoban.config.state_reward`. */
  where: string;
  /** The env's registry name, for messages. */
  envName: string;
}

/** Throws a VagenError naming the key when the reward cannot run as configured. */
export function checkStateRewardSetup(setup: StateRewardSetup): void {
  const { config, where, envName, spec } = setup;
  if (enabledSections(config).length === 0) return;
  const format = setup.promptFormat ?? "wm";
  if (!(STATE_REWARD_FORMATS as readonly string[]).includes(format)) {
    throw new VagenError(
      `${where}: world-model rewards need prompt_format wm, wm_think or free_wm, but env ${envName} has prompt_format "${format}"`,
      "set the env's prompt_format to wm (or turn state_estimation and transition_prediction off)",
    );
  }
  if (!spec) {
    throw new VagenError(
      `${where}: env ${envName} declares no state reward spec, so its descriptions cannot be scored`,
      "declare stateRewardSpec on the env (docs/envs.md) or turn the reward off",
    );
  }
  if (needsJudge(config) && (!config.judge_base_url || !config.judge_model)) {
    const missing = [config.judge_base_url ? null : "judge_base_url", config.judge_model ? null : "judge_model"].filter(Boolean).join(" and ");
    throw new VagenError(
      `${where}: ${missing} must be set when scorer is "${config.scorer}" and method is "${config.method}"`,
      "point judge_base_url at an OpenAI-compatible server (e.g. `vagen serve`) or use scorer: exact",
    );
  }
  if (config.method !== "yes_no" && config.scorer === "exact" && !spec.exactParser) {
    throw new VagenError(`${where}.scorer: env ${envName} has no exact parser`, "use scorer: judge");
  }
  if (config.method === "yes_no" && !spec.yesNoPrompts) {
    throw new VagenError(`${where}.method: env ${envName} has no YES/NO judge templates`, "use method: grouped_f1");
  }
  if (config.method === "paper_f1" && !spec.paperF1) {
    throw new VagenError(`${where}.method: env ${envName} has no paper F1 variant`, "use method: grouped_f1");
  }
}

/**
 * The system prompt with main's addition: when a reward is on and the prompt does not
 * already name all four tags, the format (order required), each enabled section's
 * example and the axes text are appended.
 */
export function stateRewardSystemPrompt(systemPrompt: string, config: StateRewardConfig, spec: StateRewardSpec): string {
  const enabled = enabledSections(config);
  if (enabled.length === 0) return systemPrompt;
  if (["<perception>", "<reasoning>", "<prediction>", "<answer>"].every((tag) => systemPrompt.includes(tag))) return systemPrompt;
  const examples = enabled.map(({ section }) => spec.examples[section]);
  return [systemPrompt, "Use the complete response format below; the order is required:", WM_FORMAT, ...examples, spec.axes].join("\n");
}

/**
 * The env as main's reward wrapper shows it to the agent: its system prompt with
 * `stateRewardSystemPrompt`'s addition; everything else is the env's own.
 */
export function withStateRewardPrompt(env: Env, config: StateRewardConfig, spec: StateRewardSpec): Env {
  if (enabledSections(config).length === 0) return env;
  return {
    get stateRewardSpec() {
      return env.stateRewardSpec;
    },
    reset: (seed) => env.reset(seed),
    step: (response) => env.step(response),
    systemPrompt: async () => {
      const prompt = await env.systemPrompt();
      return { ...prompt, text: stateRewardSystemPrompt(prompt.text, config, spec) };
    },
    close: () => env.close(),
  };
}
