/**
 * `RemoteEnv`: an env whose reset/step/systemPrompt run on a remote-env server (VAGEN
 * `GymImageEnvClient`, spec 4.4). Wire-compatible with VAGEN's Python server and client.
 *
 * Lifecycle: the constructor makes no request; the first `reset(seed)` posts /connect with
 * the seed (connect and reset in one round trip) and locks the session; later calls use
 * /call. Client keys (below) stay here; every other config key is forwarded to the server
 * as `env_config`.
 *
 * Retries: up to `retries + 1` attempts with delay `backoff * 2^attempt * U(jitter)`,
 * capped at `max_delay` for connect only; after `failover_after_failures` failed attempts
 * the client walks through the other URLs, and a success elsewhere makes that URL current.
 * Unlike VAGEN, 4xx answers (bad token, unknown session, bad request) are not retried,
 * since repeating them cannot succeed, and a `reset` whose session vanished (server
 * restarted, session timed out) reconnects instead of failing.
 */
import { readFileSync } from "node:fs";
import * as v from "valibot";
import { VagenError } from "../../src/core/errors.ts";
import { DEFAULT_MAX_PNG_PIXELS } from "../../src/core/png-size.ts";
import type { Env, Observation, ResetResult, StepResult } from "../_common/types.ts";
import { decodeMultipart, encodeMultipart, requestContentType, type MultipartMessage } from "./multipart.ts";

export const remoteEnvConfigSchema = v.looseObject({
  /** Server URL(s): a list, or a string separated by `;` or newlines (`#` lines ignored). */
  base_urls: v.optional(v.union([v.string(), v.array(v.string())])),
  /** File with one URL per line, read when `base_urls` is empty. */
  url_file: v.optional(v.string()),
  /** Seconds per request. */
  timeout: v.optional(v.pipe(v.number(), v.minValue(0.001)), 120),
  retries: v.optional(v.pipe(v.number(), v.integer(), v.minValue(0)), 6),
  backoff: v.optional(v.pipe(v.number(), v.minValue(0)), 2.0),
  max_delay: v.optional(v.pipe(v.number(), v.minValue(0)), 64),
  backoff_jitter_min: v.optional(v.pipe(v.number(), v.minValue(0)), 0.7),
  backoff_jitter_range: v.optional(v.pipe(v.number(), v.minValue(0)), 0.6),
  token: v.optional(v.nullable(v.string())),
  /** Name of an environment variable holding the token, so configs need not contain it. */
  token_env: v.optional(v.pipe(v.string(), v.regex(/^[A-Za-z_][A-Za-z0-9_]*$/, "an environment variable name"))),
  /** Pixel limit per observation image, checked from its header before decoding. */
  max_image_pixels: v.optional(v.pipe(v.number(), v.integer(), v.minValue(1)), DEFAULT_MAX_PNG_PIXELS),
  log_retries: v.optional(v.boolean(), true),
  failover_after_failures: v.optional(v.pipe(v.number(), v.integer(), v.minValue(0)), 4),
});

export type RemoteEnvConfig = v.InferOutput<typeof remoteEnvConfigSchema>;

const CLIENT_KEYS = new Set([
  "base_urls",
  "url_file",
  "timeout",
  "retries",
  "backoff",
  "max_delay",
  "backoff_jitter_min",
  "backoff_jitter_range",
  "token",
  "token_env",
  "max_image_pixels",
  "log_retries",
  "failover_after_failures",
]);

/** A failed remote call; `status` is the HTTP status when the server answered. */
export class RemoteEnvError extends Error {
  constructor(
    message: string,
    readonly status?: number,
  ) {
    super(message);
    this.name = "RemoteEnvError";
  }

  get retryable(): boolean {
    return this.status === undefined || this.status >= 500 || this.status === 429;
  }
}

export function parseUrls(raw: unknown): string[] {
  if (Array.isArray(raw)) return raw.filter((u): u is string => typeof u === "string").map((u) => u.trim()).filter(Boolean).map(stripSlash);
  if (typeof raw === "string") {
    return raw
      .replaceAll(";", "\n")
      .split("\n")
      .map((u) => u.trim())
      .filter((u) => u && !u.startsWith("#"))
      .map(stripSlash);
  }
  return [];
}

function stripSlash(url: string): string {
  return url.replace(/\/+$/, "");
}

/**
 * A URL fit for messages: user and password replaced by `***`, and so is the value of any
 * query parameter named like a secret (`token`, `key`, `password`, ...).
 */
export function redactUrl(url: string): string {
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    return url.replace(/\/\/[^/@\s]*@/, "//***@");
  }
  if (parsed.username || parsed.password) {
    parsed.username = "***";
    parsed.password = "";
  }
  for (const name of [...parsed.searchParams.keys()]) {
    if (/token|key|secret|pass|auth|credential/i.test(name)) parsed.searchParams.set(name, "***");
  }
  return parsed.toString().replace(/\/$/, "");
}

/** The token from `token`, or from the environment variable `token_env` names. */
function resolveToken(config: RemoteEnvConfig): string | undefined {
  if (config.token_env) {
    const value = process.env[config.token_env];
    if (!value) {
      throw new VagenError(
        `RemoteEnv: token_env names the environment variable ${config.token_env}, which is not set`,
        `export ${config.token_env}=<the server's token>, or remove token_env`,
      );
    }
    return value;
  }
  return config.token ?? undefined;
}

export class RemoteEnv implements Env {
  readonly baseUrls: string[];
  private readonly remoteConfig: Record<string, unknown>;
  private readonly token: string | undefined;
  private sessionId: string | null = null;
  private currentUrl = 0;

  constructor(private readonly config: RemoteEnvConfig) {
    let urls = parseUrls(config.base_urls);
    if (urls.length === 0 && config.url_file) {
      try {
        urls = parseUrls(readFileSync(config.url_file, "utf8"));
      } catch (err) {
        throw new VagenError(`RemoteEnv: cannot read url_file "${config.url_file}": ${(err as Error).message}`);
      }
    }
    if (urls.length === 0) {
      throw new VagenError(
        "RemoteEnv: no server URL configured",
        "set base_urls (e.g. base_urls=http://127.0.0.1:8000) or url_file",
      );
    }
    this.baseUrls = urls;
    this.token = resolveToken(config);
    this.remoteConfig = Object.fromEntries(Object.entries(config).filter(([key]) => !CLIENT_KEYS.has(key)));
  }

  /** The locked session id, or null before the first reset / after close. */
  get session(): string | null {
    return this.sessionId;
  }

  /** The URL requests go to now. */
  get currentBaseUrl(): string {
    return this.baseUrls[this.currentUrl]!;
  }

  async reset(seed: number): Promise<ResetResult> {
    if (this.sessionId === null) return this.connect(seed);
    try {
      const { data, images } = await this.call("reset", { seed });
      return { obs: toObservation(data, images), info: toInfo(data.info) };
    } catch (err) {
      if (err instanceof RemoteEnvError && err.status === 404) {
        // The server lost the session (restart or idle timeout): start a new one.
        this.sessionId = null;
        return this.connect(seed);
      }
      throw err;
    }
  }

  async step(response: string): Promise<StepResult> {
    this.requireSession("step");
    const { data, images } = await this.call("step", { action_str: response });
    return {
      obs: toObservation(data, images),
      reward: Number(data.reward ?? 0),
      done: Boolean(data.done ?? false),
      info: toInfo(data.info),
    };
  }

  async systemPrompt(): Promise<Observation> {
    this.requireSession("systemPrompt");
    const { data, images } = await this.call("system_prompt", {});
    return toObservation(data, images);
  }

  /** Closes the remote session; errors are ignored (the server may already be gone). */
  async close(): Promise<void> {
    if (this.sessionId === null) return;
    try {
      await this.post("/call", { session_id: this.sessionId, method: "close", params: {} }, { attempts: 1, capDelay: false });
    } catch {
      // Nothing to do: a dead server has no session to free.
    } finally {
      this.sessionId = null;
    }
  }

  private async connect(seed: number): Promise<ResetResult> {
    const { data, images, urlIndex } = await this.post("/connect", { env_config: this.remoteConfig, seed }, { capDelay: true });
    const id = data.session_id;
    if (typeof id !== "string" || !id) throw new RemoteEnvError(`${redactUrl(this.baseUrls[urlIndex]!)}/connect: server did not return a session_id`);
    this.sessionId = id;
    this.currentUrl = urlIndex;
    if (!("obs" in data)) {
      const reset = await this.call("reset", { seed });
      return { obs: toObservation(reset.data, reset.images), info: toInfo(reset.data.info) };
    }
    return { obs: toObservation(data, images), info: toInfo(data.info) };
  }

  private async call(method: string, params: Record<string, unknown>): Promise<MultipartMessage> {
    const result = await this.post("/call", { session_id: this.sessionId, method, params }, { capDelay: false });
    return result;
  }

  private async post(
    path: "/connect" | "/call",
    data: Record<string, unknown>,
    options: { capDelay: boolean; attempts?: number },
  ): Promise<MultipartMessage & { urlIndex: number }> {
    const { boundary, body } = encodeMultipart(data);
    const headers: Record<string, string> = { "content-type": requestContentType(boundary) };
    if (this.token) headers["x-api-key"] = this.token;
    const attempts = options.attempts ?? this.config.retries + 1;
    let lastError: RemoteEnvError | null = null;

    for (let attempt = 0; attempt < attempts; attempt++) {
      const urlIndex = this.pickUrlIndex(attempt);
      const url = `${this.baseUrls[urlIndex]}${path}`;
      const shownUrl = redactUrl(url);
      try {
        const res = await fetch(url, { method: "POST", body: body as Uint8Array<ArrayBuffer>, headers, signal: AbortSignal.timeout(this.config.timeout * 1000) });
        const bytes = new Uint8Array(await res.arrayBuffer());
        if (!res.ok) throw new RemoteEnvError(`${shownUrl}: HTTP ${res.status}: ${this.redact(errorDetail(bytes))}`, res.status);
        const message = decodeMultipart(res.headers.get("content-type") ?? "", bytes, { maxPixels: this.config.max_image_pixels });
        if (path === "/call" && urlIndex !== this.currentUrl) this.currentUrl = urlIndex;
        return { ...message, urlIndex };
      } catch (err) {
        lastError = err instanceof RemoteEnvError ? err : new RemoteEnvError(`${shownUrl}: ${this.redact((err as Error).message)}`);
        if (!lastError.retryable) {
          if (lastError.status === 404 && path === "/call") {
            throw new RemoteEnvError(`${lastError.message} (the server may have restarted or the session timed out; reset() starts a new session)`, 404);
          }
          throw lastError;
        }
      }
      if (attempt === attempts - 1) break;
      const jitter = this.config.backoff_jitter_min + this.config.backoff_jitter_range * Math.random();
      let delay = this.config.backoff * 2 ** attempt * jitter;
      if (options.capDelay) delay = Math.min(delay, this.config.max_delay);
      if (this.config.log_retries) {
        const next = this.baseUrls[this.pickUrlIndex(attempt + 1)];
        process.stderr.write(
          `[RemoteEnv] ${path} retry ${attempt + 1}/${attempts - 1} (current=${shownUrl}, next=${redactUrl(next ?? "")}, delay=${delay.toFixed(2)}s): ${lastError.message}\n`,
        );
      }
      await Bun.sleep(delay * 1000);
    }
    throw new RemoteEnvError(`remote ${path} failed after ${attempts} attempt(s): ${lastError?.message}`, lastError?.status);
  }

  /** `text` with the token and any URL credentials blanked out (fetch errors may quote the URL). */
  private redact(text: string): string {
    let out = text;
    for (const url of this.baseUrls) out = out.replaceAll(url, redactUrl(url));
    if (this.token) out = out.replaceAll(this.token, "***");
    return out;
  }

  /** Attempts 0..F use the current URL; attempt a > F uses URL (a - F) mod n. */
  private pickUrlIndex(attempt: number): number {
    const n = this.baseUrls.length;
    if (n === 1) return 0;
    const f = this.config.failover_after_failures;
    if (attempt <= f) return this.currentUrl;
    return (attempt - f) % n;
  }

  private requireSession(method: string): void {
    if (this.sessionId === null) {
      throw new RemoteEnvError(`Cannot call ${method}() before reset(). The session is established on the first reset() call.`);
    }
  }
}

function toObservation(data: Record<string, unknown>, images: Observation["images"]): Observation {
  return { text: typeof data.obs === "string" ? data.obs : "", images };
}

function toInfo(info: unknown): Record<string, unknown> {
  return typeof info === "object" && info !== null && !Array.isArray(info) ? (info as Record<string, unknown>) : {};
}

function errorDetail(bytes: Uint8Array): string {
  const text = new TextDecoder().decode(bytes);
  try {
    const parsed = JSON.parse(text) as { detail?: unknown };
    if (parsed && typeof parsed.detail === "string") return parsed.detail;
  } catch {
    // not JSON
  }
  return text.slice(0, 200);
}
