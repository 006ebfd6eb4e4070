/**
 * An `InferenceClient` for any server that speaks the OpenAI chat-completions API
 * (vLLM, SGLang, OpenRouter, OpenAI, Together, `vagen serve`).
 *
 * Every request passes a shared `RequestGate` (concurrency + requests per minute), has a
 * per-attempt timeout, and is retried with exponential backoff and jitter on 429, 5xx,
 * timeouts and network errors, honouring Retry-After. The API key is read once from the
 * environment variable named in the config and only ever placed in the Authorization
 * header: it is never logged, never in an error message, never written to disk.
 */
import { registerSecret } from "../config/redact.ts";
import { VagenError } from "../core/errors.ts";
import { InferenceError, abortError, isAbortError, isRetryableStatus } from "./errors.ts";
import { WireFormatError, buildRequestBody, parseCompletion } from "./openai-wire.ts";
import { RequestGate, sleep } from "./request-gate.ts";
import { DEFAULT_RETRY_POLICY, backoffDelay, parseRetryAfter, type RetryPolicy } from "./retry.ts";
import type { ChatMessage } from "../core/chat.ts";
import type { Completion, CreateOptions, InferenceClient, SamplingParams } from "./types.ts";

export interface OpenAIClientOptions {
  /** e.g. http://127.0.0.1:8000/v1 ("/chat/completions" is appended). */
  baseUrl: string;
  model: string;
  /** Name of the environment variable holding the API key; none means no Authorization header. */
  apiKeyEnv?: string;
  /** Per-attempt timeout. */
  timeoutMs: number;
  retry?: Partial<RetryPolicy>;
  maxConcurrency: number;
  requestsPerMinute?: number;
  /** Extra JSON fields merged into every request body. */
  extraBody?: Record<string, unknown>;
  /** Extra HTTP headers (e.g. OpenRouter's HTTP-Referer). Not for secrets: use apiKeyEnv. */
  headers?: Record<string, string>;
  /** Told about each retry (attempt number, delay, reason) for logs. */
  onRetry?: (event: RetryEvent) => void;
  /** Environment to read the key from; defaults to process.env. */
  env?: Record<string, string | undefined>;
}

/** A connection the server refused or that never opened (Bun's and Node's fetch messages). */
const UNREACHABLE = /unable to connect|ECONNREFUSED|connection refused|ConnectionRefused|ENOTFOUND|EHOSTUNREACH|ENETUNREACH|failed to connect/i;
/** Requests that retried to the end against an unreachable server before the rest stop retrying. */
const UNREACHABLE_REQUESTS_BEFORE_FAIL_FAST = 2;

export interface RetryEvent {
  retry: number;
  delayMs: number;
  reason: string;
}

export class OpenAICompatibleClient implements InferenceClient {
  readonly description: string;
  private readonly url: string;
  private readonly displayEndpoint: string;
  private readonly apiKey: string | undefined;
  private readonly policy: RetryPolicy;
  private readonly gate: RequestGate;
  /**
   * Requests in a row that gave up on a server that could not be reached. Once a few have
   * (the first episodes of an eval all failing), a connection failure is not retried any
   * more: a server that is down stays down for the run, and seven tries per episode only
   * make the run slow to say so. Any answer from the server resets it.
   */
  #unreachableStreak = 0;

  constructor(private readonly options: OpenAIClientOptions) {
    this.url = `${options.baseUrl.replace(/\/+$/, "")}/chat/completions`;
    // Error messages name the endpoint; keep anything secret-looking in the URL out of them.
    this.displayEndpoint = `${displayUrl(options.baseUrl)}/chat/completions`;
    this.description = `${options.model} @ ${displayUrl(options.baseUrl)}`;
    this.policy = { ...DEFAULT_RETRY_POLICY, ...options.retry };
    this.gate = new RequestGate({ maxConcurrency: options.maxConcurrency, requestsPerMinute: options.requestsPerMinute });
    this.apiKey = readApiKey(options.apiKeyEnv, options.env ?? process.env);
  }

  async create(messages: ChatMessage[], sampling: SamplingParams, options: CreateOptions = {}): Promise<Completion> {
    const body = JSON.stringify(buildRequestBody(this.options.model, messages, sampling, this.options.extraBody));
    const { signal } = options;
    for (let retry = 0; ; retry++) {
      let failure: InferenceError;
      try {
        const completion = await this.attempt(body, signal);
        this.#unreachableStreak = 0;
        return completion;
      } catch (err) {
        if (isAbortError(err)) throw err;
        if (!(err instanceof InferenceError)) throw err;
        failure = err;
      }
      const unreachable = failure.status === undefined && UNREACHABLE.test(failure.message);
      if (failure.status !== undefined) this.#unreachableStreak = 0;
      const givenUp = unreachable && this.#unreachableStreak >= UNREACHABLE_REQUESTS_BEFORE_FAIL_FAST;
      if (!failure.retryable || retry >= this.policy.maxRetries || givenUp) {
        if (unreachable) this.#unreachableStreak++;
        if (givenUp) {
          throw new InferenceError(`${failure.message} (${this.#unreachableStreak} requests in a row could not reach the server: not retrying)`, false, undefined, undefined, failure.hint);
        }
        if (failure.retryable) {
          throw new InferenceError(`${failure.message} (gave up after ${retry + 1} attempts)`, false, failure.status, undefined, failure.hint);
        }
        throw failure;
      }
      const delayMs = backoffDelay(this.policy, retry + 1, failure.retryAfterMs);
      this.options.onRetry?.({ retry: retry + 1, delayMs, reason: failure.message });
      await sleep(delayMs, signal);
    }
  }

  /** One HTTP round trip inside a gate slot; every failure becomes an InferenceError or AbortError. */
  private async attempt(body: string, signal?: AbortSignal): Promise<Completion> {
    const release = await this.gate.acquire(signal);
    const timeout = AbortSignal.timeout(this.options.timeoutMs);
    const combined = signal ? AbortSignal.any([signal, timeout]) : timeout;
    try {
      const response = await fetch(this.url, { method: "POST", headers: this.headers(), body, signal: combined });
      // Read the body under the same timeout: a server can stall mid-response too.
      const text = await response.text();
      if (!response.ok) throw this.statusError(response, text);
      let json: unknown;
      try {
        json = JSON.parse(text);
      } catch {
        throw new InferenceError(`${this.displayEndpoint}: response is not JSON: ${snippet(this.redact(text))}`, true, response.status);
      }
      try {
        return parseCompletion(json);
      } catch (err) {
        if (err instanceof WireFormatError) throw new InferenceError(`${this.displayEndpoint}: ${err.message}`, true, response.status);
        throw err;
      }
    } catch (err) {
      if (err instanceof InferenceError) throw err;
      if (signal?.aborted) throw abortError(signal);
      if (timeout.aborted) {
        throw new InferenceError(`${this.displayEndpoint}: no complete response within ${this.options.timeoutMs} ms`, true, undefined, undefined, "raise model.timeout_s");
      }
      throw new InferenceError(`${this.displayEndpoint}: ${(err as Error).message}`, true, undefined, undefined, "is the server running and is model.base_url right?");
    } finally {
      release();
    }
  }

  private headers(): Record<string, string> {
    const headers: Record<string, string> = { "content-type": "application/json", ...this.options.headers };
    if (this.apiKey) headers.authorization = `Bearer ${this.apiKey}`;
    return headers;
  }

  /** Some servers echo the key they rejected; never let it reach a message. */
  private redact(text: string): string {
    return this.apiKey ? text.split(this.apiKey).join("[api key]") : text;
  }

  private statusError(response: Response, body: string): InferenceError {
    const status = response.status;
    const message = `${this.displayEndpoint}: HTTP ${status}${response.statusText ? ` ${response.statusText}` : ""}: ${snippet(this.redact(body))}`;
    const hint =
      status === 401 || status === 403
        ? `the server rejected the API key; check the variable named by model.api_key_env${this.options.apiKeyEnv ? ` (${this.options.apiKeyEnv})` : ""}`
        : status === 404
          ? "check model.base_url (it usually ends in /v1) and model.model"
          : undefined;
    return new InferenceError(message, isRetryableStatus(status), status, parseRetryAfter(response.headers.get("retry-after")), hint);
  }
}

function readApiKey(envVar: string | undefined, env: Record<string, string | undefined>): string | undefined {
  if (!envVar) return undefined;
  const key = env[envVar];
  // From here on no output, log or error message can show it.
  registerSecret(key);
  if (!key) {
    throw new VagenError(
      `model.api_key_env names the environment variable ${envVar}, but it is not set`,
      `export ${envVar}=... before running, or remove model.api_key_env for a server without authentication`,
    );
  }
  return key;
}

/** The URL without credentials or query (which some gateways use for keys), for logs and metrics. */
function displayUrl(url: string): string {
  try {
    const u = new URL(url);
    return `${u.protocol}//${u.host}${u.pathname}`.replace(/\/+$/, "");
  } catch {
    return url;
  }
}

/** The start of a response body for error messages, on one line. */
function snippet(text: string, max = 300): string {
  const flat = text.replace(/\s+/g, " ").trim();
  return flat.length > max ? `${flat.slice(0, max)}...` : flat || "(empty body)";
}
