/**
 * Sokoban env config (VAGEN main `SokobanEnvConfig`, spec 2.1), with the paper's reward
 * set available as `reward_preset: paper`.
 */
import * as v from "valibot";
import { nonEmptyString, nonNegativeInt, positiveInt, renderMode } from "../_common/config.ts";
import { SOKOBAN_PROMPT_FORMATS } from "./prompts.ts";

const dimension = () => v.pipe(v.number(), v.integer(), v.minValue(3), v.maxValue(64));

export const SOKOBAN_REWARD_PRESETS = {
  /** VAGEN main: small per-turn format reward, success bonus, gym rewards ignored. */
  main: {
    format_reward: 0.1,
    success_reward: 1.0,
    use_gym_reward: false,
    format_reward_rule: "any_action_executed",
  },
  /**
   * The paper (legacy branch, Table 17): gym-sokoban's rewards summed (-0.1 per move,
   * +1 box on target, -1 box off, +10 solved) and 0.5 for a valid, well-formatted turn.
   */
  paper: {
    format_reward: 0.5,
    success_reward: 0,
    use_gym_reward: true,
    format_reward_rule: "valid_and_format_correct",
  },
} as const;

export const sokobanConfigSchema = v.strictObject({
  dim_room: v.optional(v.tuple([dimension(), dimension()]), [6, 6]),
  /** Accepted for compatibility; VAGEN ignores gym-sokoban's step limit. */
  max_steps: v.optional(positiveInt(), 100),
  num_boxes: v.optional(positiveInt(), 1),
  render_mode: v.optional(renderMode(), "text"),
  max_actions_per_step: v.optional(positiveInt(), 3),
  action_sep: v.optional(nonEmptyString(), ","),
  image_placeholder: v.optional(nonEmptyString(), "<image>"),
  use_example_in_sys_prompt: v.optional(v.boolean(), true),
  min_solution_steps: v.optional(
    v.nullable(
      v.pipe(
        v.tuple([nonNegativeInt(), nonNegativeInt()]),
        v.check(([min, max]) => min <= max, "min_solution_steps must be [min, max] with min <= max"),
      ),
    ),
    null,
  ),
  reset_seed_max_tries: v.optional(positiveInt(), 10000),
  min_solution_bfs_max_depth: v.optional(positiveInt(), 200),
  /**
   * BFS states per candidate room before it counts as unsolved: the solver's memory
   * grows with them (about 200 bytes each).
   */
  min_solution_bfs_max_states: v.optional(positiveInt(), 1_000_000),
  /**
   * Reverse-play and BFS states one reset may search over all its tries (a failed room
   * of 64x64 costs about 1.2 million): a config that cannot be met fails with an error
   * naming it instead of searching for good.
   */
  max_generation_states: v.optional(positiveInt(), 10_000_000),
  prompt_format: v.optional(v.picklist(SOKOBAN_PROMPT_FORMATS), "wm"),
  /**
   * Under the wm formats, a response that is not exactly the format runs none of its
   * (salvaged) actions. False restores main's pre-2026-08-10 salvage: they run.
   */
  strict_format: v.optional(v.boolean(), true),
  reward_preset: v.optional(v.picklist(["main", "paper"]), "main"),
  /** Overrides the preset's value when given. */
  format_reward: v.optional(v.number()),
  success_reward: v.optional(v.number()),
});

export type SokobanConfigInput = v.InferInput<typeof sokobanConfigSchema>;
export type SokobanConfig = v.InferOutput<typeof sokobanConfigSchema>;

export interface SokobanRewards {
  formatReward: number;
  successReward: number;
  useGymReward: boolean;
  formatRewardRule: "any_action_executed" | "valid_and_format_correct";
}

export function resolveSokobanRewards(config: SokobanConfig): SokobanRewards {
  const preset = SOKOBAN_REWARD_PRESETS[config.reward_preset];
  return {
    formatReward: config.format_reward ?? preset.format_reward,
    successReward: config.success_reward ?? preset.success_reward,
    useGymReward: preset.use_gym_reward,
    formatRewardRule: preset.format_reward_rule,
  };
}
