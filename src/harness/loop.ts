/**
 * The episode loop shared by the built-in harnesses. A harness built with
 * `defineHarness` only says what to send each turn (`prompt`) and whether a reported
 * success ends the episode; the loop does reset, system prompt, generate, step, record.
 *
 * With a client that keeps token-level conversations (the in-process engine), the loop
 * keeps the episode's conversations (token-conversations.ts): a turn whose messages
 * extend the previous call's messages and reply continues that conversation, appending
 * only the new messages; any other turn opens a fresh one. Concat thus keeps one
 * conversation per episode and no_concat opens one per turn. Other clients get the
 * whole message list each turn.
 *
 * Failures are part of the record, not exceptions: a client that still fails after its
 * retries ends the episode with "model_error", an env that throws with "env_error" (as
 * VAGEN's agent loop does). Only an abort propagates, so a cancelled episode is never
 * mistaken for a finished one.
 */
import type { Observation } from "../../envs/_common/types.ts";
import { abortError, isAbortError } from "../clients/errors.ts";
import type { ChatMessage } from "../core/chat.ts";
import type { Completion } from "../clients/types.ts";
import { DEFAULT_IMAGE_PLACEHOLDER, observationToMessage, reportedSuccess } from "./observation.ts";
import { TokenConversations, type TokenCall } from "./token-conversations.ts";
import type { ConversationView, EpisodeFinishReason, EpisodeRecord, EpisodeSummary, Harness, HarnessDefinition, HarnessRunOptions, TurnRecord, UnusableReason } from "./types.ts";

export function defineHarness(definition: HarnessDefinition): Harness {
  return {
    name: definition.name,
    rowPerTurn: definition.rowPerTurn,
    runEpisode: (options) => runAgentLoop(definition, options),
  };
}

const ENV_ERROR_OBSERVATION: Observation = { text: "Environment Error", images: [] };

export async function runAgentLoop(definition: HarnessDefinition, options: HarnessRunOptions): Promise<EpisodeRecord> {
  const { client } = options;
  const tokens = options.tokenLevel !== false && client.openConversation ? new TokenConversations(client, options.limits) : undefined;
  try {
    const record = await runTurns(definition, options, tokens);
    if (tokens) record.conversations = tokens.close();
    return record;
  } finally {
    // An abort (or a bug) must not leave engine sessions behind.
    tokens?.close();
  }
}

async function runTurns(definition: HarnessDefinition, options: HarnessRunOptions, tokens: TokenConversations | undefined): Promise<EpisodeRecord> {
  const { env, client, seed, maxTurns, sampling, signal } = options;
  const placeholder = options.imagePlaceholder ?? DEFAULT_IMAGE_PLACEHOLDER;
  const record: EpisodeRecord = {
    harness: definition.name,
    rowPerTurn: definition.rowPerTurn,
    seed,
    systemPrompt: { text: "", images: [] },
    initialObservation: { text: "", images: [] },
    resetInfo: {},
    turns: [],
    finishReason: "max_turns",
    totalReward: 0,
  };
  const finish = (reason: EpisodeFinishReason, error?: unknown, unusable?: UnusableReason): EpisodeRecord => {
    record.finishReason = reason;
    if (error !== undefined && (reason === "model_error" || reason === "env_error")) {
      record.error = { kind: reason, message: error instanceof Error ? error.message : String(error) };
    }
    if (unusable !== undefined) record.unusable = unusable;
    record.totalReward = record.turns.reduce((sum, t) => sum + t.reward, 0);
    return record;
  };

  let system: ChatMessage;
  let current: ChatMessage;
  try {
    // Reset before the system prompt: remote envs rely on this order.
    const reset = await env.reset(seed);
    record.initialObservation = reset.obs;
    record.resetInfo = reset.info;
    record.systemPrompt = await env.systemPrompt();
    system = observationToMessage("system", record.systemPrompt, placeholder);
    current = observationToMessage("user", reset.obs, placeholder);
  } catch (err) {
    if (isAbortError(err)) throw err;
    return finish("env_error", err);
  }
  const initial = current;
  const history: { assistant: ChatMessage; observation: ChatMessage; record: TurnRecord }[] = [];

  let summary: EpisodeSummary | undefined;

  for (let index = 1; index <= maxTurns; index++) {
    if (signal?.aborted) throw abortError(signal);
    let prompt = definition.prompt({ system, initial, turns: history, current, summary });
    let call: TokenCall;
    try {
      const summaryBudget = tokens && definition.summary ? tokens.summaryBudget(prompt, definition.summary, sampling) : undefined;
      if (tokens && definition.summary && summaryBudget !== undefined) {
        const written = await tokens.summarize(definition.summary.request, { ...sampling, maxTokens: summaryBudget }, signal);
        if (written.kind === "stop") return finish(written.reason, undefined, written.unusable);
        summary = { text: written.text, afterTurns: history.length, conversation: written.conversation };
        (record.summaries ??= []).push(summary);
        prompt = definition.prompt({ system, initial, turns: history, current, summary });
      }
      call = tokens ? await tokens.send(prompt, sampling, signal) : messageCall(await client.create(prompt, sampling, { signal }));
    } catch (err) {
      if (isAbortError(err) || signal?.aborted) throw isAbortError(err) ? err : abortError(signal);
      return finish("model_error", err);
    }
    if (call.kind === "stop") return finish(call.reason, undefined, call.unusable);
    const { completion, assistant } = call;

    let turn: TurnRecord;
    let envError: unknown;
    try {
      const step = await env.step(completion.text);
      turn = { index, prompt, completion, reward: step.reward, done: step.done, info: step.info, observation: step.obs };
    } catch (err) {
      envError = err;
      turn = { index, prompt, completion, reward: 0, done: true, info: {}, observation: ENV_ERROR_OBSERVATION };
    }
    if (call.at) turn.call = call.at;
    record.turns.push(turn);
    options.onTurn?.(turn);
    if (envError !== undefined) return finish("env_error", envError);
    if (turn.done) return finish("done");
    if (definition.stopOnSuccess && reportedSuccess(turn.info) === true) return finish("success");

    try {
      current = observationToMessage("user", turn.observation, placeholder);
    } catch (err) {
      return finish("env_error", err);
    }
    history.push({ assistant, observation: current, record: turn });
  }
  return finish("max_turns");
}

/** A message-level completion as a call result: the reply as an assistant message. */
function messageCall(completion: Completion): TokenCall {
  return { kind: "reply", completion, assistant: { role: "assistant", content: [{ type: "text", text: completion.text }] } };
}
