import { describe, expect, test } from "bun:test";
import type { StateRewardSpec } from "../../envs/_common/types.ts";
import { FROZENLAKE_STATE_REWARD_SPEC } from "../../envs/frozenlake/index.ts";
import { SokobanEnv, SOKOBAN_STATE_REWARD_SPEC as SPEC } from "../../envs/sokoban/index.ts";
import { validate } from "../../src/config/validate.ts";
import { StateRewardConfig, splitStateReward } from "../../src/rewards/config.ts";
import { checkStateRewardSetup, stateRewardSystemPrompt } from "../../src/rewards/setup.ts";
import { config } from "./helpers.ts";

const where = "envs.sokoban.config.state_reward";
const on = { state_estimation: { enable: true, reward: 0.03 } };

describe("state_reward config", () => {
  test("main's defaults", () => {
    expect(config()).toMatchObject({
      state_estimation: { enable: false, reward: 0 },
      transition_prediction: { enable: false, reward: 0 },
      score_base: 0.334,
      scorer: "judge",
      method: "grouped_f1",
      credit_site: "section_end",
      aggregation: "per_turn",
      judge: { max_concurrency: 32, timeout_s: 60, temperature: 0, max_tokens: 512 },
    });
  });

  test("mistakes name the file, the key and what was expected", () => {
    expect(() => validate(StateRewardConfig, { scorer: "regex" }, { file: "train.yaml" })).toThrow(/train\.yaml: key "scorer": got "regex".*"judge" \| "exact"/);
    expect(() => validate(StateRewardConfig, { state_estimation: { enabled: true } }, { file: "train.yaml" })).toThrow(/enabled/);
    expect(() => validate(StateRewardConfig, { judge_base_url: "not a url" }, { file: "train.yaml" })).toThrow(/judge_base_url/);
  });

  test("state_reward is popped from the env's config before the env sees it", () => {
    const { env, stateReward } = splitStateReward({ prompt_format: "wm", state_reward: on });
    expect(env).toEqual({ prompt_format: "wm" });
    expect(stateReward).toEqual(on);
    expect(() => new SokobanEnv({ prompt_format: "wm", state_reward: on } as never)).toThrow(/state_reward/);
  });
});

describe("startup checks (main's build_env)", () => {
  const check = (cfg: Parameters<typeof config>[0], promptFormat: string | undefined, spec: StateRewardSpec | null = SPEC) =>
    checkStateRewardSetup({ config: config(cfg), promptFormat, spec: spec ?? undefined, where, envName: "Sokoban" });

  test("nothing enabled: nothing checked", () => {
    expect(() => check({}, "free_think", null)).not.toThrow();
  });

  test("the format must be a wm format (a missing one counts as wm)", () => {
    expect(() => check({ ...on, scorer: "exact" }, "free_think")).toThrow(/envs\.sokoban\.config\.state_reward: .*prompt_format wm, wm_think or free_wm.*"free_think"/);
    for (const format of ["wm", "wm_think", "free_wm", undefined]) expect(() => check({ ...on, scorer: "exact" }, format)).not.toThrow();
  });

  test("the env must declare a spec", () => {
    expect(() => check({ ...on, scorer: "exact" }, "wm", null)).toThrow(/declares no state reward spec/);
  });

  test("a judge must be set unless the scorer needs none", () => {
    expect(() => check(on, "wm")).toThrow(/judge_base_url and judge_model must be set/);
    expect(() => check({ ...on, judge_base_url: "http://127.0.0.1:8123/v1" }, "wm")).toThrow(/judge_model must be set/);
    expect(() => check({ ...on, scorer: "exact" }, "wm")).not.toThrow();
    // YES/NO always asks a judge, whatever the scorer.
    expect(() => check({ ...on, scorer: "exact", method: "yes_no" }, "wm")).toThrow(/judge_base_url/);
  });

  test("the chosen method must be one the env supports", () => {
    const { yesNoPrompts: _drop, ...noYesNo } = SPEC;
    expect(() => check({ ...on, method: "yes_no", judge_base_url: "http://127.0.0.1:1/v1", judge_model: "m" }, "wm", noYesNo)).toThrow(/state_reward\.method.*YES\/NO/);
    const { exactParser: _none, ...noParser } = FROZENLAKE_STATE_REWARD_SPEC;
    expect(() => check({ ...on, scorer: "exact" }, "wm", noParser)).toThrow(/state_reward\.scorer.*no exact parser/);
  });
});

describe("system prompt addition", () => {
  test("appended only when the prompt lacks one of the four tags", async () => {
    const cfg = config({ ...on, transition_prediction: { enable: true, reward: 0.03 }, scorer: "exact" });
    const wmPrompt = (await new SokobanEnv({ prompt_format: "wm" }).systemPrompt()).text;
    expect(stateRewardSystemPrompt(wmPrompt, cfg, SPEC)).toBe(wmPrompt);
    const bare = "You are a Sokoban solver.";
    expect(stateRewardSystemPrompt(bare, cfg, SPEC)).toBe(
      [bare, "Use the complete response format below; the order is required:", "<perception>...</perception><reasoning>...</reasoning><prediction>...</prediction><answer>...</answer>", SPEC.examples.state_estimation, SPEC.examples.transition_prediction, SPEC.axes].join("\n"),
    );
    expect(stateRewardSystemPrompt(bare, config(), SPEC)).toBe(bare);
  });
});
