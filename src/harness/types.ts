/**
 * The harness seam. A harness owns the message list and the episode loop: it decides
 * what the model sees each turn and when the episode ends. It never builds token rows or
 * masks; it records each turn faithfully so the rollout layer can.
 */
import type { Env, EnvInfo, Observation } from "../../envs/_common/types.ts";
import type { ChatMessage, Role } from "../core/chat.ts";
import type { Completion, InferenceClient, SamplingParams } from "../clients/types.ts";
import type { ConversationRecord } from "../models/conversation.ts";

/**
 * Token budgets of a training row (VAGEN's `data.max_prompt_length` and
 * `data.max_response_length`). With them the harness leaves each generation only the
 * room the row still has (`generationLimit`) and drops an episode whose opening prompt
 * cannot fit.
 */
export interface RowLimits {
  maxPromptLength?: number;
  maxResponseLength?: number;
}

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
  /** Row budgets (training); without them only `sampling.maxTokens` bounds a turn. */
  limits?: RowLimits;
  /**
   * Keep token-level conversations when the client offers them (default true). false
   * sends whole message lists through `client.create` even to an in-process engine.
   */
  tokenLevel?: boolean;
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
  /**
   * Where the reply sits in the token-level record (token-level episodes only): the
   * conversation's ordinal in `EpisodeRecord.conversations` and the reply's index
   * among that conversation's sampled spans.
   */
  call?: { conversation: number; reply: number };
}

/** One token-level conversation of an episode, as the model saw and sampled it. */
export interface EpisodeConversation {
  /** 0, 1, ... in the order the conversations were opened. */
  ordinal: number;
  record: ConversationRecord;
  /** The conversation ended with a model-written summary (a summarising harness). */
  endsWithSummary: boolean;
}

/**
 * Why an episode cannot be trained on (VAGEN's EpisodeUnusable); a rollout drops it
 * without failing the batch:
 * - context_too_large: an opening prompt is longer than the row's prompt budget;
 * - sampled_vision_token: the model wrote an image placeholder or vision marker id;
 * - compaction_no_progress: two conversations in a row were summarised after one turn or
 *   less (the budget cannot hold a turn beside a summary).
 */
export type UnusableReason = "context_too_large" | "sampled_vision_token" | "compaction_no_progress";

/** A model-written summary that ended a conversation (summarising harnesses). */
export interface EpisodeSummary {
  text: string;
  /** Env turns played before it; the conversation it opens continues from there. */
  afterTurns: number;
  /** Ordinal of the conversation it ended. */
  conversation: number;
}

/**
 * How an episode ended:
 * - done: the env said done;
 * - success: the env reported success without done and the harness stops on success;
 * - max_turns: the turn limit was reached;
 * - model_error / env_error: the client (after its retries) or the env threw;
 * - no_room: the row's response budget leaves no room for another generation;
 * - empty_generation: the model ended a reply without writing a token;
 * - unusable: see `unusable` (token-level episodes only).
 */
export type EpisodeFinishReason = "done" | "success" | "max_turns" | "model_error" | "env_error" | "no_room" | "empty_generation" | "unusable";

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
  /** Set when finishReason is "unusable". */
  unusable?: UnusableReason;
  /** Token-level episodes: every conversation, in the order opened (released by the time the record is returned). */
  conversations?: EpisodeConversation[];
  /** Summaries written by the model (summarising harnesses), in order. */
  summaries?: EpisodeSummary[];
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

/** When a summarising harness compacts (VAGEN main's compact). */
export interface SummaryPolicy {
  /** The user message that asks for the summary. */
  request: ChatMessage;
  /** Tokens the summary may take; default max(1, min(per-turn limit, budget / 4)), budget = compactBudget or the row's response budget. */
  summaryBudget?: number;
  /** Also summarise once the conversation's tokens plus the last turn's cost reach this. */
  compactBudget?: number;
}

/** What a prompt policy can look at when building the next turn's messages. */
export interface ConversationView {
  system: ChatMessage;
  /** The first observation, as a user message. */
  initial: ChatMessage;
  /** Earlier turns, oldest first: the reply and the observation that followed. */
  turns: ReadonlyArray<{ assistant: ChatMessage; observation: ChatMessage; record: TurnRecord }>;
  /** The observation the model must answer now (the initial one on turn 1). */
  current: ChatMessage;
  /** The latest summary the model wrote (summarising harnesses), if any. */
  summary?: EpisodeSummary;
}

/** A harness as `defineHarness` (loop.ts) takes it: what to send each turn, and when to stop. */
export interface HarnessDefinition {
  name: string;
  rowPerTurn: boolean;
  /** Whether `info.success` ends the episode even when the env does not say done. */
  stopOnSuccess: boolean;
  prompt(view: ConversationView): ChatMessage[];
  /**
   * Summarise-and-restart (VAGEN main's compact; token-level clients only): before a
   * call that continues a conversation, the loop asks for a summary when the policy's
   * budgets say so, closes that conversation, and builds the prompt again with `summary`
   * in the view.
   */
  summary?: SummaryPolicy;
}

/**
 * Builds a harness from the options given in config (`harness: {name: ..., <options>}`).
 * Factories loaded from a user's file also get the `kit`, so a harness file needs no
 * runtime import from vagen (it works with the compiled binary too).
 */
export type HarnessFactory = (options: Record<string, unknown>, kit: HarnessKit) => Harness;

/**
 * The helpers handed to harness factories: loop.ts's and observation.ts's functions
 * (registry.ts hands over those very functions, so their signatures are checked there).
 */
export interface HarnessKit {
  defineHarness(definition: HarnessDefinition): Harness;
  runAgentLoop(definition: HarnessDefinition, options: HarnessRunOptions): Promise<EpisodeRecord>;
  observationToMessage(role: Role, obs: Observation, placeholder?: string): ChatMessage;
  reportedSuccess(info: EnvInfo | undefined): boolean | undefined;
}
