/**
 * The remote-env HTTP server (VAGEN `envs_remote/service.py` + `handler.py`, spec 4.4):
 * one stateful env per session, held in this process.
 *
 *   GET  /health    {"ok": true, "service": "gym-env-service", "max_inflight": N | "unlimited"}
 *   GET  /sessions  session statistics (auth applies; session ids only with a token)
 *   POST /connect   multipart {env_config, seed?} -> {session_id[, obs, info] + images}
 *   POST /call      multipart {session_id, method, params} -> method result + images
 *
 * Errors are JSON `{"detail": ...}`: 401 bad token, 400 missing fields, invalid env config
 * or a config whose level cannot be generated, 403 a browser's cross-origin request, 404
 * unknown session, 413 body too large, 415 not the protocol's multipart type, 503 busy
 * or max sessions, 500 anything else.
 *
 * Closed by default, unlike VAGEN's: a server without a token listens only on a loopback
 * address unless `insecure` is set; sessions are limited in number and closed after an
 * idle timeout, looked for at a tenth of that timeout; image parts of requests (which no
 * method uses) are never decoded; bodies are size-limited.
 */
import { VagenError } from "../../src/core/errors.ts";
import type { Env, Observation } from "../_common/types.ts";
import { decodeMultipart, encodeMultipart, MultipartError, responseContentType } from "./multipart.ts";

export type EnvFactory = (envConfig: Record<string, unknown>) => Promise<Env>;

/** Defaults of the limits, shared with `vagen env serve`'s flags. */
export const ENV_SERVER_DEFAULTS = {
  maxSessions: 256,
  sessionTimeout: 600,
  maxInflight: 64,
  admitTimeout: 5,
  maxBodyBytes: 8 * 1024 * 1024,
} as const;

export interface EnvServerOptions {
  createEnv: EnvFactory;
  /** 127.0.0.1 unless given. */
  hostname?: string;
  /** 0 picks a free port. */
  port?: number;
  /** Required as `?token=` or the `x-api-key` header when set. */
  token?: string;
  /** Allow listening on a non-loopback address without a token. */
  insecure?: boolean;
  /** 0 = unlimited (default 256). */
  maxSessions?: number;
  /** Seconds a session may sit idle before it is closed (default 600; VAGEN: 3600). */
  sessionTimeout?: number;
  /** How often idle sessions are looked for, in seconds (default: a tenth of the timeout, at most 60). */
  cleanupInterval?: number;
  /** Concurrent requests admitted; 0 = unlimited (default 64). */
  maxInflight?: number;
  /** Seconds to wait for an admission slot before answering 503. */
  admitTimeout?: number;
  /** Largest request body accepted, in bytes (default 8 MiB). */
  maxBodyBytes?: number;
  /** Called with one line per notable event (session created, closed, timed out). */
  log?: (line: string) => void;
}

interface Session {
  id: string;
  env: Env;
  createdAt: number;
  lastAccess: number;
  /** Requests running on this session; a busy session is never timed out. */
  busy: number;
}

class HttpError extends Error {
  constructor(
    readonly status: number,
    readonly detail: string,
  ) {
    super(detail);
  }
}

class SessionNotFound extends HttpError {
  constructor(id: string) {
    super(404, `Session ${id} not found`);
  }
}

/** A counting semaphore whose `acquire` gives up after a timeout. */
class Admission {
  private free: number;
  private readonly waiters: (() => void)[] = [];
  constructor(readonly limit: number) {
    this.free = limit;
  }
  async acquire(timeoutMs: number): Promise<boolean> {
    if (this.free > 0) {
      this.free--;
      return true;
    }
    return new Promise<boolean>((resolve) => {
      const grant = () => {
        clearTimeout(timer);
        resolve(true);
      };
      const timer = setTimeout(() => {
        const i = this.waiters.indexOf(grant);
        if (i >= 0) this.waiters.splice(i, 1);
        resolve(false);
      }, timeoutMs);
      this.waiters.push(grant);
    });
  }
  release(): void {
    const next = this.waiters.shift();
    if (next) next();
    else this.free++;
  }
}

export class EnvServer {
  private readonly sessions = new Map<string, Session>();
  /** Connects past the session-limit check whose env is still being built. */
  private connecting = 0;
  private readonly admission: Admission | null;
  private server: ReturnType<typeof Bun.serve> | null = null;
  private cleanupTimer: ReturnType<typeof setInterval> | null = null;
  private readonly options: Required<Omit<EnvServerOptions, "token" | "log" | "cleanupInterval">> &
    Pick<EnvServerOptions, "token" | "log"> & { cleanupInterval: number };

  constructor(options: EnvServerOptions) {
    const sessionTimeout = options.sessionTimeout ?? ENV_SERVER_DEFAULTS.sessionTimeout;
    this.options = {
      hostname: "127.0.0.1",
      port: 0,
      insecure: false,
      ...ENV_SERVER_DEFAULTS,
      ...withoutUndefined(options),
      createEnv: options.createEnv,
      sessionTimeout,
      // Sweeping at a tenth of the timeout closes a session at most 10% late.
      cleanupInterval: options.cleanupInterval ?? Math.min(60, Math.max(0.05, sessionTimeout / 10)),
    };
    this.admission = this.options.maxInflight > 0 ? new Admission(this.options.maxInflight) : null;
  }

  /** Starts listening; returns the base URL (`http://host:port`). */
  start(): string {
    if (this.server) return this.url;
    const { hostname, token, insecure } = this.options;
    if (!token && !insecure && !isLoopback(hostname)) {
      throw new VagenError(
        `refusing to serve on ${hostname} without a token: anyone who can reach it could open sessions`,
        "set a token (--token, or the VAGEN_ENV_TOKEN environment variable), listen on 127.0.0.1, or pass --insecure",
      );
    }
    this.server = Bun.serve({
      hostname,
      port: this.options.port,
      // Bun's own limit answers with an empty 413 before handle() could say why, so it
      // is only a backstop far above the limit handle() enforces while reading.
      maxRequestBodySize: Math.max(8 * this.options.maxBodyBytes, 64 * 1024 * 1024),
      fetch: (request) => this.handle(request),
    });
    this.cleanupTimer = setInterval(() => void this.closeIdleSessions(), this.options.cleanupInterval * 1000);
    this.cleanupTimer.unref?.();
    return this.url;
  }

  get port(): number {
    if (!this.server) throw new Error("EnvServer: not started");
    return this.server.port as number;
  }

  get url(): string {
    const host = this.options.hostname.includes(":") ? `[${this.options.hostname}]` : this.options.hostname;
    return `http://${host}:${this.port}`;
  }

  get sessionCount(): number {
    return this.sessions.size;
  }

  /** The limits in force (defaults filled in). */
  get limits(): { maxSessions: number; sessionTimeout: number; cleanupInterval: number; maxInflight: number; maxBodyBytes: number } {
    const { maxSessions, sessionTimeout, cleanupInterval, maxInflight, maxBodyBytes } = this.options;
    return { maxSessions, sessionTimeout, cleanupInterval, maxInflight, maxBodyBytes };
  }

  /** Stops listening and closes every session (in parallel). */
  async stop(): Promise<void> {
    if (this.cleanupTimer) clearInterval(this.cleanupTimer);
    this.cleanupTimer = null;
    this.server?.stop(true);
    this.server = null;
    const sessions = [...this.sessions.values()];
    this.sessions.clear();
    await Promise.all(sessions.map((s) => s.env.close().catch(() => undefined)));
  }

  /** Closes sessions idle longer than `sessionTimeout`; returns how many were closed. */
  async closeIdleSessions(now = Date.now()): Promise<number> {
    const expired = [...this.sessions.values()].filter((s) => s.busy === 0 && (now - s.lastAccess) / 1000 > this.options.sessionTimeout);
    for (const session of expired) {
      this.sessions.delete(session.id);
      this.options.log?.(`session ${session.id} timed out after ${((now - session.lastAccess) / 1000).toFixed(1)} s idle`);
      await session.env.close().catch(() => undefined);
    }
    return expired.length;
  }

  private async handle(request: Request): Promise<Response> {
    const path = new URL(request.url).pathname;
    try {
      const route = ROUTES[path];
      if (!route) throw new HttpError(404, "Not Found");
      if (request.method !== route.method) throw new HttpError(405, "Method Not Allowed");
      if (path === "/health") return this.health();
      rejectBrowserRequests(request);
      this.authenticate(request);
      if (path === "/sessions") return Response.json(this.stats());
      const contentType = request.headers.get("content-type") ?? "";
      if (!isProtocolContentType(contentType)) {
        throw new HttpError(415, `expected a multipart/form-data body (the remote-env protocol), got ${JSON.stringify(contentType || "no Content-Type")}`);
      }
      this.checkDeclaredLength(request);
      const admitted = await this.admit();
      try {
        const body = await this.readBody(request);
        // No method takes images: their parts are counted, never decoded.
        const { data } = decodeMultipart(contentType, body, { decodeImages: false });
        return path === "/connect" ? await this.connect(data) : await this.call(data);
      } finally {
        if (admitted) this.admission!.release();
      }
    } catch (err) {
      return errorResponse(err);
    }
  }

  private health(): Response {
    const maxInflight = this.options.maxInflight > 0 ? this.options.maxInflight : "unlimited";
    return Response.json({ ok: true, service: "gym-env-service", max_inflight: maxInflight });
  }

  private authenticate(request: Request): void {
    const expected = this.options.token;
    if (!expected) return;
    const given = new URL(request.url).searchParams.get("token") || request.headers.get("x-api-key");
    if (given !== expected) throw new HttpError(401, "unauthorized");
  }

  private checkDeclaredLength(request: Request): void {
    const declared = Number(request.headers.get("content-length") ?? "0");
    if (declared > this.options.maxBodyBytes) throw this.bodyTooLarge(`${declared} bytes`);
  }

  /** The body, read chunk by chunk so that one without a Content-Length stops at the limit too. */
  private async readBody(request: Request): Promise<Uint8Array> {
    const chunks: Uint8Array[] = [];
    let size = 0;
    for await (const chunk of request.body ?? []) {
      size += chunk.length;
      if (size > this.options.maxBodyBytes) throw this.bodyTooLarge(`more than ${this.options.maxBodyBytes} bytes`);
      chunks.push(chunk);
    }
    return Buffer.concat(chunks);
  }

  private bodyTooLarge(size: string): HttpError {
    return new HttpError(413, `request body of ${size} is over the limit of ${this.options.maxBodyBytes} bytes`);
  }

  private async admit(): Promise<boolean> {
    if (!this.admission) return false;
    if (await this.admission.acquire(this.options.admitTimeout * 1000)) return true;
    throw new HttpError(503, "server busy");
  }

  private stats() {
    const now = Date.now();
    // Session ids are the keys to the sessions: only a server with a token (whose holder
    // owns them all) lists them.
    const showIds = Boolean(this.options.token);
    return {
      num_sessions: this.sessions.size,
      max_sessions: this.options.maxSessions,
      session_timeout: this.options.sessionTimeout,
      sessions: [...this.sessions.values()].map((s) => {
        const idle = (now - s.lastAccess) / 1000;
        return {
          ...(showIds ? { session_id: s.id } : {}),
          created_at: s.createdAt / 1000,
          last_access: s.lastAccess / 1000,
          idle_seconds: idle,
          will_timeout_in: Math.max(0, this.options.sessionTimeout - idle),
        };
      }),
    };
  }

  private async connect(data: Record<string, unknown>): Promise<Response> {
    const { maxSessions } = this.options;
    if (maxSessions > 0 && this.sessions.size + this.connecting >= maxSessions) {
      throw new HttpError(503, `Max sessions limit reached (${maxSessions}). Please try again later or close existing sessions.`);
    }
    const envConfig = isRecord(data.env_config) ? data.env_config : {};
    const seed = data.seed === undefined || data.seed === null ? null : toSeed(data.seed);
    this.connecting++;
    let env: Env | null = null;
    try {
      env = await clientErrorsAs400(() => this.options.createEnv(envConfig));
      // Reset before the session exists, so a config whose level cannot be generated
      // leaves no session behind.
      const first = seed === null ? null : await clientErrorsAs400(() => env!.reset(seed));
      const id = crypto.randomUUID().replaceAll("-", "");
      const now = Date.now();
      this.sessions.set(id, { id, env, createdAt: now, lastAccess: now, busy: 0 });
      env = null;
      this.options.log?.(`session ${id} created (${this.sessions.size}/${maxSessions > 0 ? maxSessions : "unlimited"})`);
      if (!first) return multipart({ session_id: id });
      return multipart({ session_id: id, obs: first.obs.text, info: first.info }, first.obs.images);
    } finally {
      this.connecting--;
      if (env) await env.close().catch(() => undefined);
    }
  }

  private async call(data: Record<string, unknown>): Promise<Response> {
    const id = data.session_id;
    const method = data.method;
    if (typeof id !== "string" || !id) throw new HttpError(400, "session_id required");
    if (typeof method !== "string" || !method) throw new HttpError(400, "method required");
    const params = isRecord(data.params) ? data.params : {};
    const session = this.sessions.get(id);
    if (!session) throw new SessionNotFound(id);
    session.busy++;
    session.lastAccess = Date.now();
    try {
      return await this.runMethod(session, method, params);
    } finally {
      session.busy--;
      session.lastAccess = Date.now();
    }
  }

  private async runMethod(session: Session, method: string, params: Record<string, unknown>): Promise<Response> {
    switch (method) {
      case "system_prompt":
        return observationResponse(await session.env.systemPrompt(), {});
      case "reset": {
        const { obs, info } = await clientErrorsAs400(() => session.env.reset(toSeed(params.seed ?? 0)));
        return observationResponse(obs, { info });
      }
      case "step": {
        const actionStr = typeof params.action_str === "string" ? params.action_str : "";
        const { obs, reward, done, info } = await session.env.step(actionStr);
        return observationResponse(obs, { reward, done, info });
      }
      case "close":
        this.sessions.delete(session.id);
        await session.env.close();
        this.options.log?.(`session ${session.id} closed (${this.sessions.size} remaining)`);
        return multipart({ closed: true });
      default:
        throw new HttpError(500, `Unknown method: ${method}`);
    }
  }
}

/** A `VagenError` (bad env config, a level that cannot be generated) is the client's: 400. */
async function clientErrorsAs400<T>(run: () => Promise<T>): Promise<T> {
  try {
    return await run();
  } catch (err) {
    if (err instanceof VagenError) throw new HttpError(400, err.message);
    throw err;
  }
}

/**
 * Browsers label cross-origin requests with `Origin` (and `Sec-Fetch-Site`); the
 * protocol's clients never do. A page must not be able to drive a local env server with
 * a form post, which needs no CORS preflight.
 */
function rejectBrowserRequests(request: Request): void {
  const site = request.headers.get("sec-fetch-site");
  if (request.headers.has("origin") || (site !== null && site !== "none")) {
    throw new HttpError(403, "requests from web pages are not accepted");
  }
}

/** The protocol posts `multipart/form-data` (VAGEN's decoder also reads `multipart/mixed`). */
function isProtocolContentType(contentType: string): boolean {
  const type = contentType.split(";")[0]!.trim().toLowerCase();
  return type === "multipart/form-data" || type === "multipart/mixed";
}

/** 127.0.0.0/8, ::1 and localhost: addresses only this machine can reach. */
export function isLoopback(hostname: string): boolean {
  const host = hostname.replace(/^\[|\]$/g, "").toLowerCase();
  return host === "localhost" || host === "::1" || /^127(\.\d{1,3}){3}$/.test(host);
}

function withoutUndefined<T extends object>(options: T): Partial<T> {
  return Object.fromEntries(Object.entries(options).filter(([, value]) => value !== undefined)) as Partial<T>;
}

const ROUTES: Record<string, { method: string }> = {
  "/health": { method: "GET" },
  "/sessions": { method: "GET" },
  "/connect": { method: "POST" },
  "/call": { method: "POST" },
};

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

function toSeed(value: unknown): number {
  const seed = typeof value === "string" ? Number(value) : value;
  if (typeof seed !== "number" || !Number.isFinite(seed)) throw new HttpError(400, `seed must be an integer, got ${JSON.stringify(value)}`);
  return seed;
}

function observationResponse(obs: Observation, extra: Record<string, unknown>): Response {
  // The wire uses `obs` for the text (VAGEN's env dicts call it `obs_str`).
  return multipart({ obs: obs.text, ...extra }, obs.images);
}

function multipart(data: Record<string, unknown>, images: Observation["images"] = []): Response {
  const { boundary, body } = encodeMultipart(data, images);
  return new Response(body as Uint8Array<ArrayBuffer>, { headers: { "content-type": responseContentType(boundary) } });
}

function errorResponse(err: unknown): Response {
  if (err instanceof HttpError) return Response.json({ detail: err.detail }, { status: err.status });
  if (err instanceof MultipartError) return Response.json({ detail: err.message }, { status: 400 });
  const message = err instanceof Error ? err.message : String(err);
  return Response.json({ detail: message }, { status: 500 });
}
