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

export interface Env {
  /** Same seed, same initial state, on every machine. */
  reset(seed: number): Promise<ResetResult>;
  /** One model turn: the raw response text. Malformed text never throws. */
  step(response: string): Promise<StepResult>;
  /** The system prompt (text; images allowed but unused by built-in envs). */
  systemPrompt(): Promise<Observation>;
  close(): Promise<void>;
}
