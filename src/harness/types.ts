/**
 * The harness seam. A harness owns the message list and the episode loop: it decides
 * what the model sees each turn and when the episode ends. It never builds token rows or
 * masks; it records each turn faithfully so the rollout layer can.
 */
import type { Env, EnvInfo, Observation } from "../../envs/_common/types.ts";
import type { ChatMessage } from "../core/chat.ts";
import type { Completion, InferenceClient, SamplingParams } from "../clients/types.ts";

export interface HarnessRunOptions {
  env: Env;
  client: InferenceClient;
  seed: number;
  /** Model turns at most; the episode ends with finishReason "max_turns" after that. */
  maxTurns: number;
  /** Per-turn sampling, including the per-turn token limit (maxTokens). */
  sampling: SamplingParams;
  /** The env's image placeholder in observation text ("<image>" unless its config says otherwise). */
  imagePlaceholder?: string;
  /** Aborts the episode: the run rejects with an AbortError and nothing is recorded. */
  signal?: AbortSignal;
  /** Called after every turn (live progress, streaming dumps). */
  onTurn?: (turn: TurnRecord) => void;
}

export interface TurnRecord {
  /** 1-based. */
  index: number;
  /** Exactly the messages sent to the model this turn. */
  prompt: ChatMessage[];
  /** The model's answer, with token ids and log-probs when the client gives them. */
  completion: Completion;
  reward: number;
  done: boolean;
  info: EnvInfo;
  /** The observation the env returned after this turn. */
  observation: Observation;
}

/**
 * How an episode ended:
 * - done: the env said done;
 * - success: the env reported success without done and the harness stops on success;
 * - max_turns: the turn limit was reached;
 * - model_error / env_error: the client (after its retries) or the env threw.
 */
export type EpisodeFinishReason = "done" | "success" | "max_turns" | "model_error" | "env_error";

export interface EpisodeRecord {
  harness: string;
  /** True when each turn becomes its own training row (the prompt does not grow by appending). */
  rowPerTurn: boolean;
  seed: number;
  systemPrompt: Observation;
  initialObservation: Observation;
  resetInfo: EnvInfo;
  turns: TurnRecord[];
  finishReason: EpisodeFinishReason;
  /** Sum of per-turn rewards. */
  totalReward: number;
  error?: { kind: "model_error" | "env_error"; message: string };
}

export interface Harness {
  readonly name: string;
  /**
   * Whether one episode spans several training rows: false for concat (one growing
   * conversation = one row), true for no_concat and compact (each turn's prompt is rebuilt,
   * so each turn is its own row).
   */
  readonly rowPerTurn: boolean;
  runEpisode(options: HarnessRunOptions): Promise<EpisodeRecord>;
}

/**
 * Builds a harness from the options given in config (`harness: {name: ..., <options>}`).
 * Factories loaded from a user's file also get the `kit`, so a harness file needs no
 * runtime import from vagen (it works with the compiled binary too).
 */
export type HarnessFactory = (options: Record<string, unknown>, kit: HarnessKit) => Harness;

/** The helpers handed to harness factories. */
export interface HarnessKit {
  defineHarness: typeof import("./loop.ts").defineHarness;
  runAgentLoop: typeof import("./loop.ts").runAgentLoop;
  observationToMessage: typeof import("./observation.ts").observationToMessage;
  reportedSuccess: typeof import("./observation.ts").reportedSuccess;
}
