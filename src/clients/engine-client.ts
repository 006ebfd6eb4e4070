/**
 * The in-process client: the inference-client seam over vagen's own generation engine.
 *
 * It returns the exact generated token ids and their sampling log-probs, so training
 * never re-tokenizes text. Two ways in:
 *
 * - `openConversation()`: a token-level conversation (src/models/conversation.ts) under
 *   an explicit engine session id. Each new message is tokenized alone and appended, the
 *   sampled ids go in verbatim, and every turn continues the session (`continuesSession`),
 *   so the engine prefills only the tokens added since the last turn. This is what the
 *   harnesses use for episodes, and what rollouts turn into training rows.
 * - `create(messages)` / `generate(messages)`: the message path of the OpenAI-compatible
 *   server. The whole conversation is rendered each time; a request whose prompt starts
 *   with the full prompt of an earlier answered request (the same tokens and the same
 *   images, compared exactly) continues that request's session, so the engine reuses the
 *   cached prefix up to the first token that differs.
 */
import type { Engine } from "../engine/engine.ts";
import { loadEngine, type EngineSettings, type LoadedEngine } from "../engine/load.ts";
import type { ChatPromptBuilder } from "../engine/chat.ts";
import type { GenerationResult, Prompt, SamplingOptions, TokenEvent } from "../engine/types.ts";
import type { ChatMessage } from "../core/chat.ts";
import { VagenError } from "../core/errors.ts";
import { Conversation, type ConversationCodec, type ConversationRecord } from "../models/conversation.ts";
import type { ClientConversation, Completion, CreateOptions, InferenceClient, SamplingParams } from "./types.ts";

export interface EngineClientOptions {
  /** Defaults for fields a request leaves unset (the engine's own defaults apply after these). */
  defaults?: Partial<SamplingOptions>;
  /** The family's conversation codec; `openConversation` needs it. */
  codec?: ConversationCodec;
  /** Ids the model must never sample (image placeholders, vision markers). */
  visionTokenIds?: readonly number[];
  /** Message-path sessions kept for reuse; the least recently used are released beyond this. */
  maxMessageSessions?: number;
  /** Close the engine when the client closes (the client created it). */
  ownsEngine?: boolean;
}

export class EngineClient implements InferenceClient {
  readonly description: string;
  /** Message-path sessions: id -> the prompt its last request ran. Insertion-ordered = LRU. */
  private readonly messageSessions = new Map<string, Prompt>();
  private readonly openConversations = new Set<EngineConversation>();
  private readonly visionTokenIds: ReadonlySet<number>;
  private nextSession = 1;

  constructor(
    readonly engine: Engine,
    readonly builder: ChatPromptBuilder,
    private readonly options: EngineClientOptions = {},
  ) {
    this.description = `engine:${builder.modelName}`;
    this.visionTokenIds = new Set(options.visionTokenIds ?? []);
  }

  async create(messages: ChatMessage[], sampling: SamplingParams, options: CreateOptions = {}): Promise<Completion> {
    return toCompletion(await this.generate(messages, toEngineSampling(sampling), options));
  }

  openConversation(): ClientConversation {
    const codec = this.options.codec;
    if (!codec) throw new VagenError(`${this.description}: this engine client has no conversation codec, so it cannot keep token-level conversations`);
    const conversation = new EngineConversation(this, codec, `episode-${this.nextSession++}`);
    this.openConversations.add(conversation);
    return conversation;
  }

  /**
   * The engine-level call behind `create`: every sampling option (top-k, stop ids, ...)
   * and per-token streaming. The HTTP server uses it too.
   */
  async generate(
    messages: readonly ChatMessage[],
    sampling: Partial<SamplingOptions>,
    options: { signal?: AbortSignal; onToken?: (event: TokenEvent) => void } = {},
  ): Promise<GenerationResult> {
    const prompt = this.builder.buildPrompt(messages);
    const sessionId = this.takeMessageSession(prompt) ?? `conversation-${this.nextSession++}`;
    let result: GenerationResult;
    try {
      result = await this.engine.generate({ prompt, sessionId, signal: options.signal, onToken: options.onToken, sampling: this.withDefaults(sampling) });
    } catch (e) {
      this.engine.releaseSession(sessionId);
      throw e;
    }
    this.rememberMessageSession(sessionId, prompt);
    return result;
  }

  isVisionToken(id: number): boolean {
    return this.visionTokenIds.has(id);
  }

  withDefaults(sampling: Partial<SamplingOptions>): Partial<SamplingOptions> {
    return { ...this.options.defaults, ...sampling };
  }

  /** Called by a conversation when it is released. */
  forget(conversation: EngineConversation): void {
    this.openConversations.delete(conversation);
  }

  async close(): Promise<void> {
    for (const sessionId of this.messageSessions.keys()) this.engine.releaseSession(sessionId);
    this.messageSessions.clear();
    for (const conversation of [...this.openConversations]) conversation.release();
    if (this.options.ownsEngine) await this.engine.close();
  }

  /** The session whose last prompt is the longest exact prefix of `prompt`, if any (taken out of the pool). */
  private takeMessageSession(prompt: Prompt): string | undefined {
    let best: string | undefined;
    let bestLength = 0;
    for (const [sessionId, previous] of this.messageSessions) {
      if (previous.tokenIds.length > bestLength && isPromptPrefix(previous, prompt)) {
        best = sessionId;
        bestLength = previous.tokenIds.length;
      }
    }
    if (best !== undefined) this.messageSessions.delete(best);
    return best;
  }

  private rememberMessageSession(sessionId: string, prompt: Prompt): void {
    this.messageSessions.set(sessionId, prompt);
    const max = this.options.maxMessageSessions ?? 4096;
    while (this.messageSessions.size > max) {
      const oldest = this.messageSessions.keys().next().value as string;
      this.messageSessions.delete(oldest);
      this.engine.releaseSession(oldest);
    }
  }
}

/** A token-level conversation continued under one explicit engine session. */
class EngineConversation implements ClientConversation {
  private released = false;
  private readonly conversation: Conversation;
  private firstMessage: ChatMessage | undefined;

  constructor(
    private readonly client: EngineClient,
    private readonly codec: ConversationCodec,
    readonly id: string,
  ) {
    this.conversation = new Conversation(codec);
  }

  get length(): number {
    return this.conversation.length;
  }

  get responseLength(): number {
    const firstSampled = this.conversation.turns.find((t) => t.sampled !== undefined)?.sampled;
    return firstSampled ? this.conversation.length - firstSampled.start : 0;
  }

  /** A KV slot's size: the engine refuses a prompt that fills it. */
  get contextLimit(): number {
    return this.client.engine.capacity.slotTokens;
  }

  addMessages(messages: readonly ChatMessage[]): number {
    const before = this.conversation.length;
    for (const message of messages) {
      this.conversation.addMessage(message);
      this.firstMessage ??= message;
    }
    return this.conversation.length - before;
  }

  /**
   * Measured on a scratch conversation that holds only this one's first message: a
   * message's framing depends on what came before it only through whether it is the
   * first (a default system prompt), as in Qwen's template; a template that frames later
   * messages by more history would be measured approximately.
   */
  measure(messages: readonly ChatMessage[], options: { replyPrompt?: boolean } = {}): number {
    const scratch = new Conversation(this.codec);
    if (this.firstMessage) scratch.addMessage(this.firstMessage);
    const before = scratch.length;
    for (const message of messages) scratch.addMessage(message);
    if (options.replyPrompt) scratch.beginReply();
    return scratch.length - before;
  }

  async reply(sampling: SamplingParams, options: CreateOptions = {}): Promise<Completion> {
    if (this.released) throw new VagenError(`conversation ${this.id} was released; open a new one`);
    const prompt = this.conversation.beginReply();
    let result: GenerationResult;
    try {
      result = await this.client.engine.generate({
        prompt,
        sessionId: this.id,
        continuesSession: true,
        signal: options.signal,
        sampling: this.client.withDefaults(toEngineSampling(sampling)),
      });
    } catch (e) {
      // The open reply cannot be completed: close it empty so the record stays well formed.
      this.conversation.addReply({ tokenIds: [], logprobs: [], finishReason: "abort" });
      this.release();
      throw e;
    }
    this.conversation.addReply({ tokenIds: result.tokenIds, logprobs: result.logprobs, finishReason: result.finishReason });
    return toCompletion(result);
  }

  isVisionToken(id: number): boolean {
    return this.client.isVisionToken(id);
  }

  record(): ConversationRecord {
    return this.conversation.record();
  }

  release(): void {
    if (this.released) return;
    this.released = true;
    this.client.engine.releaseSession(this.id);
    this.client.forget(this);
  }
}

function toCompletion(result: GenerationResult): Completion {
  return {
    text: result.text,
    finishReason: result.finishReason,
    usage: { promptTokens: result.promptTokens, completionTokens: result.tokenIds.length },
    tokenIds: result.tokenIds,
    logprobs: result.logprobs,
  };
}

/** `previous` is a prefix of `prompt`: the same ids, and the same images at the same offsets. */
function isPromptPrefix(previous: Prompt, prompt: Prompt): boolean {
  const n = previous.tokenIds.length;
  if (n > prompt.tokenIds.length) return false;
  for (let i = 0; i < n; i++) if (previous.tokenIds[i] !== prompt.tokenIds[i]) return false;
  const within = prompt.images.filter((img) => img.offset < n);
  if (within.length !== previous.images.length) return false;
  return within.every((img, i) => img.offset === previous.images[i]!.offset && img.key === previous.images[i]!.key);
}

export function toEngineSampling(s: SamplingParams): Partial<SamplingOptions> {
  const out: Partial<SamplingOptions> = {};
  if (s.temperature !== undefined) out.temperature = s.temperature;
  if (s.topP !== undefined) out.topP = s.topP;
  if (s.maxTokens !== undefined) out.maxNewTokens = s.maxTokens;
  if (s.stop !== undefined) out.stopStrings = s.stop;
  if (s.seed !== undefined) out.seed = s.seed;
  return out;
}

/**
 * What a token-level conversation needs from a loaded engine's model family: the
 * conversation codec and the ids the model must never sample.
 */
export function engineConversationSupport(loaded: Pick<LoadedEngine, "model">): Pick<EngineClientOptions, "codec" | "visionTokenIds"> {
  return { codec: loaded.model.conversationCodec(), visionTokenIds: loaded.model.visionTokenIds };
}

/**
 * An engine client over an engine someone else owns (the trainer's `createEngine`), with
 * token-level conversations.
 */
export function engineClientFor(loaded: LoadedEngine, defaults: SamplingParams = {}): EngineClient {
  return new EngineClient(loaded.engine, loaded.builder, { defaults: toEngineSampling(defaults), ...engineConversationSupport(loaded) });
}

/**
 * Load a model directory, start an engine over it, and return a client that owns both
 * (close() frees the engine and the model's memory). `settings` are the `engine:` keys of
 * a config (EngineSettings); `defaults` apply to fields a request leaves unset.
 */
export function createEngineClient(modelDir: string, settings: Partial<EngineSettings> = {}, defaults: SamplingParams = {}): EngineClient {
  const loaded = loadEngine(modelDir, settings);
  const client = engineClientFor(loaded, defaults);
  const closeClient = client.close.bind(client);
  client.close = async () => {
    await closeClient();
    await loaded.close();
  };
  return client;
}
