/**
 * The in-process client: the inference-client seam over vagen's own generation engine.
 *
 * It returns the exact generated token ids and their sampling log-probs, so training
 * never re-tokenizes text. It also turns the harness's growing message lists into engine
 * sessions without the harness knowing: when a request's messages start with a
 * conversation this client answered before (its messages plus the assistant reply it
 * produced), the request continues that conversation's session, and the engine prefills
 * only what is new since the cached prefix.
 */
import type { Engine } from "../engine/engine.ts";
import { loadEngine, type EngineSettings } from "../engine/load.ts";
import type { ChatPromptBuilder } from "../engine/chat.ts";
import { imageKey } from "../engine/prompt.ts";
import type { GenerationResult, SamplingOptions, TokenEvent } from "../engine/types.ts";
import type { ChatMessage } from "../core/chat.ts";
import type { Completion, CreateOptions, InferenceClient, SamplingParams } from "./types.ts";

export interface EngineClientOptions {
  /** Defaults for fields a request leaves unset (the engine's own defaults apply after these). */
  defaults?: Partial<SamplingOptions>;
  /** Conversations remembered for session reuse; the oldest are released beyond this. */
  maxConversations?: number;
  /** Close the engine when the client closes (the client created it). */
  ownsEngine?: boolean;
}

export class EngineClient implements InferenceClient {
  readonly description: string;
  /** Fingerprint of (messages + assistant reply) -> the session holding that conversation. Insertion-ordered = LRU. */
  private readonly conversations = new Map<string, string>();
  private nextSession = 1;

  constructor(
    readonly engine: Engine,
    readonly builder: ChatPromptBuilder,
    private readonly options: EngineClientOptions = {},
  ) {
    this.description = `engine:${builder.modelName}`;
  }

  async create(messages: ChatMessage[], sampling: SamplingParams, options: CreateOptions = {}): Promise<Completion> {
    const result = await this.generate(messages, toEngineSampling(sampling), options);
    return {
      text: result.text,
      finishReason: result.finishReason,
      usage: { promptTokens: result.promptTokens, completionTokens: result.tokenIds.length },
      tokenIds: result.tokenIds,
      logprobs: result.logprobs,
    };
  }

  /**
   * The engine-level call behind `create`: every sampling option (top-k, stop ids, ...)
   * and per-token streaming. The HTTP server uses it too, so its multi-turn
   * conversations get the same KV reuse.
   */
  async generate(
    messages: readonly ChatMessage[],
    sampling: Partial<SamplingOptions>,
    options: { signal?: AbortSignal; onToken?: (event: TokenEvent) => void } = {},
  ): Promise<GenerationResult> {
    const prompt = this.builder.buildPrompt(messages);
    const prints = prefixFingerprints(messages);
    const sessionId = this.takeSession(prints) ?? `conversation-${this.nextSession++}`;
    let result: GenerationResult;
    try {
      result = await this.engine.generate({
        prompt,
        sessionId,
        signal: options.signal,
        onToken: options.onToken,
        sampling: { ...this.options.defaults, ...sampling },
      });
    } catch (e) {
      this.engine.releaseSession(sessionId);
      throw e;
    }
    const reply: ChatMessage = { role: "assistant", content: [{ type: "text", text: result.text }] };
    this.remember(extendFingerprint(prints[prints.length - 1]!, reply), sessionId);
    return result;
  }

  async close(): Promise<void> {
    for (const sessionId of this.conversations.values()) this.engine.releaseSession(sessionId);
    this.conversations.clear();
    if (this.options.ownsEngine) await this.engine.close();
  }

  /** The session of the longest earlier conversation these messages continue, if any. */
  private takeSession(prints: string[]): string | undefined {
    for (let n = prints.length - 1; n >= 1; n--) {
      const sessionId = this.conversations.get(prints[n]!);
      if (sessionId !== undefined) {
        this.conversations.delete(prints[n]!);
        return sessionId;
      }
    }
    return undefined;
  }

  private remember(print: string, sessionId: string): void {
    this.conversations.set(print, sessionId);
    const max = this.options.maxConversations ?? 4096;
    while (this.conversations.size > max) {
      const [oldest, oldSession] = this.conversations.entries().next().value as [string, string];
      this.conversations.delete(oldest);
      this.engine.releaseSession(oldSession);
    }
  }
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

/** prints[n] identifies messages[0..n) (prints[0] is the empty conversation). */
function prefixFingerprints(messages: readonly ChatMessage[]): string[] {
  const prints = [""];
  for (const m of messages) prints.push(extendFingerprint(prints[prints.length - 1]!, m));
  return prints;
}

function extendFingerprint(previous: string, message: ChatMessage): string {
  const parts = message.content.map((p) => (p.type === "text" ? `t:${p.text}` : `i:${imageKey(p.image)}`));
  return Bun.hash.wyhash(`${previous}\u0000${message.role}\u0000${parts.join("\u0001")}`).toString(16);
}

/**
 * Load a model directory, start an engine over it, and return a client that owns both
 * (close() frees the engine and the model's memory). `settings` are the `engine:` keys of
 * a config (EngineSettings); `defaults` apply to fields a request leaves unset.
 */
export function createEngineClient(modelDir: string, settings: Partial<EngineSettings> = {}, defaults: SamplingParams = {}): EngineClient {
  const loaded = loadEngine(modelDir, settings);
  const client = new EngineClient(loaded.engine, loaded.builder, { defaults: toEngineSampling(defaults) });
  const closeClient = client.close.bind(client);
  client.close = async () => {
    await closeClient();
    await loaded.close();
  };
  return client;
}
