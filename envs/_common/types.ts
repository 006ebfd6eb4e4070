/**
 * The environment contract (VAGEN-compatible, async). See docs/architecture.md.
 *
 * The agent loop calls `reset` before `systemPrompt` (the remote client relies on it),
 * then `step` once per model turn with the raw decoded text; the env parses it itself.
 * `done` is the only termination signal.
 */
import type { RGBImage } from "../../src/core/image.ts";

/**
 * What the model sees: text in which each image appears as a placeholder token
 * (`"<image>"` unless the env config says otherwise), and the images in order.
 * `images.length` always equals the number of placeholders in `text`.
 */
export interface Observation {
  text: string;
  images: RGBImage[];
}

/** Per-turn and per-trajectory diagnostics, logged and dumped by eval. */
export interface EnvMetrics {
  turn_metrics?: Record<string, number | boolean>;
  traj_metrics?: Record<string, number | boolean>;
}

/**
 * Free-form, JSON-serialisable info. Built-in envs set `success`, `metrics`, the parser
 * outputs (`llm_raw_response`, `think_content`, `actions`, `format_correct`, ...) and the
 * ground-truth `state` used by world-model rewards.
 */
export interface EnvInfo {
  success?: boolean;
  metrics?: EnvMetrics;
  [key: string]: unknown;
}

export interface ResetResult {
  obs: Observation;
  info: EnvInfo;
}

export interface StepResult {
  obs: Observation;
  reward: number;
  done: boolean;
  info: EnvInfo;
}

/** One object's relation to the player, as a description states it (null: not stated). */
export interface StateRelation {
  object_id: string;
  vertical_relation: "above" | "below" | "same" | null;
  horizontal_relation: "left" | "right" | "same" | null;
}

/**
 * What an env declares so its world-model descriptions can be scored (VAGEN main's
 * `STATE_REWARD_SPEC`; docs/envs.md and docs/world-model.md). The scorers live in
 * src/rewards; the env only says what the truth is and how to read a description.
 */
export interface StateRewardSpec {
  /** Gold relations from the `info.state` the env returned (before or after a step). */
  relations(state: unknown): StateRelation[];
  /** Per object type weight in the grouped F1; only these types are scored. */
  objectWeights: Readonly<Record<string, number>>;
  /** The judge's extraction prompt; `{content}` is replaced by the section's text. */
  judgePrompt: string;
  /** Deterministic closed-vocabulary reader of a description (the `exact` scorer). */
  exactParser?(text: string): StateRelation[];
  /** Plain-sentence examples appended to the system prompt, per section. */
  examples: { state_estimation: string; transition_prediction: string };
  /** How the axes work, appended after the examples. */
  axes: string;
  /** The paper's YES/NO judge templates; `{state}` and `{content}` are filled in. */
  yesNoPrompts?: { state_estimation: string; transition_prediction: string };
  /** Which of the paper's F1 variants the env used: FrozenLake's weighted bipartite, Sokoban's with a repetition penalty. */
  paperF1?: "weighted_bipartite" | "sokoban_repetition";
}

export interface Env {
  /** Present when the env can score world-model descriptions (state_reward). */
  readonly stateRewardSpec?: StateRewardSpec;
  /** Same seed, same initial state, on every machine. */
  reset(seed: number): Promise<ResetResult>;
  /** One model turn: the raw response text. Malformed text never throws. */
  step(response: string): Promise<StepResult>;
  /** The system prompt (text; images allowed but unused by built-in envs). */
  systemPrompt(): Promise<Observation>;
  close(): Promise<void>;
}
