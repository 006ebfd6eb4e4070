/**
 * `state_reward` under an env's config (VAGEN main 2026, `envs[].config.state_reward`):
 * which world-model sections are rewarded and how much, the chance floor, how a
 * description is read (`judge` or `exact`), how it is scored (main's grouped F1 or the
 * paper's variants), where the score lands in the tokens and the judge endpoint.
 *
 * The key is popped from the env's config before the env sees it (`splitStateReward`),
 * as main's `build_env` does.
 */
import * as v from "valibot";

const nonNegative = (what: string) => v.pipe(v.number(), v.minValue(0, `${what} >= 0`));
const positive = (what: string) => v.pipe(v.number(), v.gtValue(0, `${what} > 0`));

export const SectionRewardConfig = v.strictObject({
  enable: v.optional(v.boolean(), false),
  /** The amount paid per turn for a perfect description (main: absolute, not a weight). */
  reward: v.optional(v.number(), 0),
});

export const JudgeConfig = v.strictObject({
  /** Requests in flight at once, shared by every turn of a rollout step (main: 32). */
  max_concurrency: v.optional(v.pipe(v.number(), v.integer(), v.minValue(1)), 32),
  /** Request starts per minute; 0 means unlimited. */
  requests_per_minute: v.optional(v.pipe(v.number(), v.integer(), v.minValue(0)), 0),
  /** Per-attempt timeout (main: 60 s). */
  timeout_s: v.optional(positive("timeout_s"), 60),
  /** Retries on 429, 5xx, timeouts and network errors, with exponential backoff. */
  max_retries: v.optional(v.pipe(v.number(), v.integer(), v.minValue(0)), 2),
  min_backoff_s: v.optional(positive("min_backoff_s"), 1),
  max_backoff_s: v.optional(positive("max_backoff_s"), 30),
  temperature: v.optional(nonNegative("temperature"), 0),
  max_tokens: v.optional(v.pipe(v.number(), v.integer(), v.minValue(1)), 512),
});

export const STATE_REWARD_SECTIONS = ["state_estimation", "transition_prediction"] as const;
export type StateRewardSection = (typeof STATE_REWARD_SECTIONS)[number];

export const StateRewardConfig = v.strictObject({
  /** Score `<perception>` against the state before the step. */
  state_estimation: v.optional(SectionRewardConfig, {}),
  /** Score `<prediction>` against the state after the step. */
  transition_prediction: v.optional(SectionRewardConfig, {}),
  /** Chance-level floor of the grouped F1: scores at or below it pay 0 (main: 0.334). */
  score_base: v.optional(v.pipe(v.number(), v.maxValue(0.999, "score_base < 1")), 0.334),
  /** How a description becomes relations: an LLM judge, or the env's deterministic parser. */
  scorer: v.optional(v.picklist(["judge", "exact"], "judge or exact"), "judge"),
  /**
   * How relations become a score: main's grouped F1 with the chance floor, the env's
   * paper F1 (FrozenLake's weighted bipartite, Sokoban's with the repetition penalty; no
   * floor), or the paper's YES/NO judgement (needs the judge).
   */
  method: v.optional(v.picklist(["grouped_f1", "paper_f1", "yes_no"], "grouped_f1, paper_f1 or yes_no"), "grouped_f1"),
  /** Where a section's score lands: its last token (main's default) or the turn's last token. */
  credit_site: v.optional(v.picklist(["section_end", "turn_end"], "section_end or turn_end"), "section_end"),
  /** Pay each turn its own score, or each turn its score over the episode's turn count. */
  aggregation: v.optional(v.picklist(["per_turn", "episode_mean"], "per_turn or episode_mean"), "per_turn"),
  /** OpenAI-compatible endpoint of the judge (e.g. `vagen serve`), ending in /v1. */
  judge_base_url: v.optional(v.pipe(v.string(), v.url("an http(s) URL such as http://127.0.0.1:8123/v1"))),
  judge_model: v.optional(v.pipe(v.string(), v.minLength(1, "a model name"))),
  /** The environment variable holding the judge's API key (the key never goes in a config). */
  judge_api_key_env: v.optional(v.pipe(v.string(), v.regex(/^[A-Za-z_][A-Za-z0-9_]*$/, "an environment variable name"))),
  judge: v.optional(JudgeConfig, {}),
  /**
   * What a judge request that still fails after its retries (server down, 5xx, timeout)
   * does: `score_zero` scores the section 0, counts it and warns (main's behaviour, so a
   * judge outage never stops training); `fail` stops instead (a training step throws, an
   * eval episode ends in an error), for runs whose numbers must not hide an outage.
   * An unparseable reply is the judge's answer, not a failure: it always scores 0.
   */
  on_judge_error: v.optional(v.picklist(["score_zero", "fail"], "score_zero or fail"), "score_zero"),
  /** The paper's Sokoban repetition penalty (method paper_f1). */
  repetition: v.optional(
    v.strictObject({
      top_m: v.optional(v.pipe(v.number(), v.integer(), v.minValue(1)), 1000),
      top_k: v.optional(v.pipe(v.number(), v.integer(), v.minValue(1)), 5),
      threshold: v.optional(v.number(), 0.7),
      penalty: v.optional(v.number(), -0.1),
    }),
    {},
  ),
});

export type StateRewardConfig = v.InferOutput<typeof StateRewardConfig>;
export type StateRewardConfigInput = v.InferInput<typeof StateRewardConfig>;

/** The enabled sections with their reward, in protocol order. */
export function enabledSections(config: StateRewardConfig): { section: StateRewardSection; reward: number }[] {
  return STATE_REWARD_SECTIONS.filter((section) => config[section].enable).map((section) => ({ section, reward: config[section].reward }));
}

/** True when scoring needs an LLM judge (anything but the exact parser under an F1 method). */
export function needsJudge(config: StateRewardConfig): boolean {
  return config.method === "yes_no" || config.scorer === "judge";
}

/**
 * Splits an env's raw config into the env's own keys and the raw `state_reward` block
 * (main's `build_env` pops it, so env schemas never see it).
 */
export function splitStateReward(envConfig: Record<string, unknown>): { env: Record<string, unknown>; stateReward: unknown } {
  const { state_reward: stateReward, ...env } = envConfig;
  return { env, stateReward };
}
