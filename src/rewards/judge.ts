/**
 * The judge: any OpenAI-compatible chat endpoint (vLLM, SGLang, `vagen serve`, a hosted
 * API) that reads a section's text and answers with relations (or YES/NO).
 *
 * One single-user-message request per item, all of a rollout step's items at once,
 * through the HTTP client's shared gate (concurrency and requests-per-minute limits) with
 * per-attempt timeouts and exponential-backoff retries on 429, 5xx, timeouts and network
 * errors. A request that still fails gives a `JudgeFailure` with the client's message
 * (endpoint and cause, already redacted): the scorer scores that section 0, counts it and
 * keeps the message, or stops, as `on_judge_error` says. Only an abort (Ctrl-C) propagates
 * from here.
 *
 * The API key is read from the environment variable the config names, registered as a
 * secret, and only ever placed in the Authorization header.
 */
import type { StateRelation } from "../../envs/_common/types.ts";
import { isAbortError } from "../clients/errors.ts";
import { OpenAICompatibleClient } from "../clients/openai-client.ts";
import type { StateRewardConfig } from "./config.ts";

/** A request that failed after its retries, with why (the message names the endpoint). */
export interface JudgeFailure {
  error: string;
}

/** The judge's text, or why there is none. */
export type JudgeReply = string | JudgeFailure;

export interface Judge {
  /** For logs and metrics; never a secret. */
  readonly description: string;
  /** One reply per prompt, in order; a `JudgeFailure` where the request failed after its retries. */
  complete(prompts: readonly string[], signal?: AbortSignal): Promise<JudgeReply[]>;
}

export function isJudgeFailure(reply: JudgeReply): reply is JudgeFailure {
  return typeof reply !== "string";
}

export class OpenAIJudge implements Judge {
  readonly description: string;
  private readonly client: OpenAICompatibleClient;

  constructor(
    private readonly config: StateRewardConfig,
    env: Record<string, string | undefined> = process.env,
  ) {
    const { judge } = config;
    this.client = new OpenAICompatibleClient({
      baseUrl: config.judge_base_url!,
      model: config.judge_model!,
      apiKeyEnv: config.judge_api_key_env,
      env,
      timeoutMs: judge.timeout_s * 1000,
      maxConcurrency: judge.max_concurrency,
      requestsPerMinute: judge.requests_per_minute,
      retry: { maxRetries: judge.max_retries, minBackoffMs: judge.min_backoff_s * 1000, maxBackoffMs: judge.max_backoff_s * 1000 },
    });
    this.description = `judge ${this.client.description}`;
  }

  complete(prompts: readonly string[], signal?: AbortSignal): Promise<JudgeReply[]> {
    const sampling = { temperature: this.config.judge.temperature, maxTokens: this.config.judge.max_tokens };
    return Promise.all(
      prompts.map(async (prompt): Promise<JudgeReply> => {
        try {
          const reply = await this.client.create([{ role: "user", content: [{ type: "text", text: prompt }] }], sampling, { signal });
          return reply.text;
        } catch (err) {
          if (isAbortError(err)) throw err;
          return { error: err instanceof Error ? err.message : String(err) };
        }
      }),
    );
  }
}

/** Fills a prompt template's `{name}` slots (only the names given; other braces stay). */
export function fillTemplate(template: string, values: Readonly<Record<string, string>>): string {
  return template.replace(/\{(\w+)\}/g, (whole, name: string) => (name in values ? values[name]! : whole));
}

const VERTICAL = new Set(["above", "below", "same"]);
const HORIZONTAL = new Set(["left", "right", "same"]);

function relationOrNull<T extends string>(value: unknown, allowed: Set<string>): T | null {
  if (typeof value !== "string") return null;
  const word = value.trim().toLowerCase();
  return allowed.has(word) ? (word as T) : null;
}

/**
 * Reads a judge's extraction reply as main does: the first `[` to the last `]`, parsed
 * as JSON, keeping the object entries. Null when there is no such array or it is not
 * JSON. Ids are lower-cased with trailing digits dropped ("Box1" is a "box"); a relation
 * outside the vocabulary counts as not stated.
 */
export function parseRelationsReply(reply: string): StateRelation[] | null {
  const match = /\[[\s\S]*\]/.exec(reply);
  if (!match) return null;
  let parsed: unknown;
  try {
    parsed = JSON.parse(match[0]);
  } catch {
    return null;
  }
  if (!Array.isArray(parsed)) return null;
  const items: StateRelation[] = [];
  for (const entry of parsed) {
    if (typeof entry !== "object" || entry === null || Array.isArray(entry)) continue;
    const item = entry as Record<string, unknown>;
    if (typeof item.object_id !== "string") continue;
    items.push({
      object_id: item.object_id.trim().toLowerCase().replace(/[\s_]*\d+$/, ""),
      vertical_relation: relationOrNull(item.vertical_relation, VERTICAL),
      horizontal_relation: relationOrNull(item.horizontal_relation, HORIZONTAL),
    });
  }
  return items;
}

/** The paper's YES/NO judgement: `<answer>YES</answer>` is 1, NO is 0, anything else null. */
export function parseYesNo(reply: string): 1 | 0 | null {
  const match = /<answer>\s*(YES|NO)\s*<\/answer>/i.exec(reply);
  if (!match) return null;
  return match[1]!.toUpperCase() === "YES" ? 1 : 0;
}
