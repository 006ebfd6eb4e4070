/**
 * Scripted pieces for rollout and harness tests: a client whose token-level
 * conversations (the real `Conversation` over the tiny Qwen2.5-VL fixture's tokenizer
 * and chat template) "sample" ids from a script, and an env whose observations,
 * rewards and done flags are a script too. No model runs, so every id is known.
 */
import type { Env, EnvInfo, Observation, StepResult } from "../../envs/_common/types.ts";
import type { ClientConversation, Completion, CreateOptions, InferenceClient, SamplingParams } from "../../src/clients/types.ts";
import type { ChatMessage } from "../../src/core/chat.ts";
import { ChatTemplate } from "../../src/models/chat-template.ts";
import { Conversation, type ConversationRecord } from "../../src/models/conversation.ts";
import { DEFAULT_IMAGE_PROCESSOR } from "../../src/models/image-processor.ts";
import { Qwen25VLConversationCodec } from "../../src/models/qwen2_5_vl/conversation-codec.ts";
import { Qwen25VLProcessor } from "../../src/models/qwen2_5_vl/processor.ts";
import { TextTokenizer } from "../../src/models/tokenizer.ts";
import { FIXTURE_DIR } from "../models/fixture.ts";

export const tokenizer = TextTokenizer.fromDir(FIXTURE_DIR);
const template = ChatTemplate.fromDir(FIXTURE_DIR);
export const codec = new Qwen25VLConversationCodec(new Qwen25VLProcessor(tokenizer, template, DEFAULT_IMAGE_PROCESSOR, 366));

// The fixture's special ids (tokenizer.json's added tokens) and the newline byte token.
export const IM_START = 361;
export const IM_END = 362;
export const VISION_START = 363;
export const VISION_END = 364;
export const PAD = 366;
export const NL = 198;
/** Text between two special tokens is tokenized on its own, so a piece's ids are its encoding. */
export const t = (text: string) => tokenizer.encode(text);

export interface ScriptedReply {
  tokenIds: number[];
  logprobs?: number[];
  finishReason?: string;
}

/** A reply's logprobs default to -0.1, -0.2, ... so every sampled position is recognisable. */
function logprobsOf(reply: ScriptedReply): number[] {
  return reply.logprobs ?? reply.tokenIds.map((_, i) => -(i + 1) / 10);
}

/**
 * Replies are taken from `script` in call order, across all conversations (an episode's
 * calls are sequential). `calls` records each call's conversation id and maxTokens.
 */
export class ScriptedClient implements InferenceClient {
  readonly description = "scripted";
  readonly calls: { conversation: string; maxTokens?: number; seed?: number }[] = [];
  readonly released: string[] = [];
  private opened = 0;

  /** A list of replies in call order, or a function of the conversation so far (concurrent episodes). */
  constructor(
    private readonly script: ScriptedReply[] | ((record: ConversationRecord) => ScriptedReply),
    /** The model's context size, as an engine's KV slot would bound it. */
    private readonly contextLimit?: number,
  ) {}

  async create(_messages: ChatMessage[], _sampling: SamplingParams): Promise<Completion> {
    throw new Error("the scripted client only keeps token-level conversations");
  }

  openConversation(): ClientConversation {
    const client = this;
    const conversation = new Conversation(codec);
    const id = `scripted-${this.opened++}`;
    let firstMessage: ChatMessage | undefined;
    return {
      id,
      get length() {
        return conversation.length;
      },
      contextLimit: this.contextLimit,
      get responseLength() {
        const first = conversation.turns.find((turn) => turn.sampled)?.sampled;
        return first ? conversation.length - first.start : 0;
      },
      addMessages(messages: readonly ChatMessage[]): number {
        const before = conversation.length;
        for (const m of messages) {
          conversation.addMessage(m);
          firstMessage ??= m;
        }
        return conversation.length - before;
      },
      measure(messages: readonly ChatMessage[], options: { replyPrompt?: boolean } = {}): number {
        const scratch = new Conversation(codec);
        if (firstMessage) scratch.addMessage(firstMessage);
        const before = scratch.length;
        for (const m of messages) scratch.addMessage(m);
        if (options.replyPrompt) scratch.beginReply();
        return scratch.length - before;
      },
      async reply(sampling: SamplingParams, _options?: CreateOptions): Promise<Completion> {
        const scripted = typeof client.script === "function" ? client.script(conversation.record()) : client.script.shift();
        if (!scripted) throw new Error("the script has no more replies");
        // As an engine would: a reply stops at the token limit.
        const next = { ...scripted, tokenIds: scripted.tokenIds.slice(0, sampling.maxTokens ?? Infinity), logprobs: scripted.logprobs?.slice(0, sampling.maxTokens ?? Infinity) };
        client.calls.push({ conversation: id, maxTokens: sampling.maxTokens, ...(sampling.seed === undefined ? {} : { seed: sampling.seed }) });
        conversation.beginReply();
        const logprobs = logprobsOf(next);
        conversation.addReply({ tokenIds: next.tokenIds, logprobs, finishReason: next.finishReason ?? "stop" });
        return {
          text: codec.decode(next.tokenIds),
          finishReason: next.finishReason ?? "stop",
          usage: { promptTokens: 0, completionTokens: next.tokenIds.length },
          tokenIds: next.tokenIds,
          logprobs,
        };
      },
      isVisionToken: (tokenId: number) => [PAD, VISION_START, VISION_END].includes(tokenId),
      record: (): ConversationRecord => conversation.record(),
      release: () => {
        client.released.push(id);
      },
    };
  }
}

export interface ScriptedStep {
  obs: Observation;
  reward: number;
  done: boolean;
  info?: EnvInfo;
}

/** An env that plays a fixed script; it records the replies it was sent. */
export class ScriptedEnv implements Env {
  readonly responses: string[] = [];
  closed = false;
  private turn = 0;

  constructor(
    private readonly first: Observation,
    private readonly steps: ScriptedStep[],
    private readonly system = "You are a tiny agent.",
  ) {}

  async reset(): Promise<{ obs: Observation; info: EnvInfo }> {
    this.turn = 0;
    return { obs: this.first, info: {} };
  }

  async step(response: string): Promise<StepResult> {
    this.responses.push(response);
    const step = this.steps[this.turn++];
    if (!step) throw new Error("the env script has no more steps");
    return { obs: step.obs, reward: step.reward, done: step.done, info: step.info ?? {} };
  }

  async systemPrompt(): Promise<Observation> {
    return { text: this.system, images: [] };
  }

  async close(): Promise<void> {
    this.closed = true;
  }
}

export const text = (s: string): Observation => ({ text: s, images: [] });
