/** FrozenLake env config (VAGEN main `FrozenLakeEnvConfig`, spec 3.1). */
import * as v from "valibot";
import { nonEmptyString, positiveInt, probability, renderMode } from "../_common/config.ts";
import { FROZENLAKE_PROMPT_FORMATS } from "./prompts.ts";

export const FROZENLAKE_REWARD_PRESETS = {
  /** VAGEN main. */
  main: { format_reward: 0.02, success_reward: 1.0 },
  /** The paper (legacy): 0.5 per valid, well-formatted turn; 10 at the goal (gym 1 + bonus 9). */
  paper: { format_reward: 0.5, success_reward: 10.0 },
} as const;

const mapRows = v.pipe(
  v.array(v.pipe(v.string(), v.regex(/^[SFHG]+$/, "map rows may only contain S, F, H, G"))),
  v.minLength(1),
  v.check((rows) => rows.every((row) => row.length === rows[0]!.length), "all map rows must have the same length"),
  v.check((rows) => rows.join("").split("S").length === 2 && rows.join("").split("G").length === 2, "the map needs exactly one S and one G"),
);

export const frozenLakeConfigSchema = v.strictObject({
  size: v.optional(v.pipe(v.number(), v.integer(), v.minValue(2), v.maxValue(64)), 4),
  /** A fixed map (rows of S/F/H/G); overrides generation. */
  desc: v.optional(v.nullable(mapRows), null),
  is_slippery: v.optional(v.boolean(), false),
  slip_prob: v.optional(probability(), 0),
  p: v.optional(probability(), 0.8),
  /** Boards drawn per reset before giving up with an error (VAGEN draws until one is valid). */
  max_generation_attempts: v.optional(positiveInt(), 100_000),
  render_mode: v.optional(renderMode(), "text"),
  max_actions_per_step: v.optional(positiveInt(), 5),
  action_sep: v.optional(nonEmptyString(), ","),
  image_placeholder: v.optional(nonEmptyString(), "<image>"),
  use_example_in_sys_prompt: v.optional(v.boolean(), true),
  prompt_format: v.optional(v.picklist(FROZENLAKE_PROMPT_FORMATS), "free_think"),
  reward_preset: v.optional(v.picklist(["main", "paper"]), "main"),
  /** Overrides the preset's value when given. */
  format_reward: v.optional(v.number()),
  success_reward: v.optional(v.number()),
});

export type FrozenLakeConfigInput = v.InferInput<typeof frozenLakeConfigSchema>;
export type FrozenLakeConfig = v.InferOutput<typeof frozenLakeConfigSchema>;
