/**
 * The remote-env HTTP server (VAGEN `envs_remote/service.py` + `handler.py`, spec 4.4):
 * one stateful env per session, held in this process.
 *
 *   GET  /health    {"ok": true, "service": "gym-env-service", "max_inflight": N | "unlimited"}
 *   GET  /sessions  session statistics (auth applies)
 *   POST /connect   multipart {env_config, seed?} -> {session_id[, obs, info] + images}
 *   POST /call      multipart {session_id, method, params} -> method result + images
 *
 * Errors are JSON `{"detail": ...}`: 401 bad token, 400 missing fields or invalid env
 * config, 404 unknown session, 503 busy or max sessions, 500 anything else.
 */
import { VagenError } from "../../src/errors.ts";
import type { Env, Observation } from "../_common/types.ts";
import { decodeMultipart, encodeMultipart, MultipartError, responseContentType } from "./multipart.ts";

export type EnvFactory = (envConfig: Record<string, unknown>) => Promise<Env>;

export interface EnvServerOptions {
  createEnv: EnvFactory;
  /** 127.0.0.1 unless given. */
  hostname?: string;
  /** 0 picks a free port. */
  port?: number;
  /** Required as `?token=` or the `x-api-key` header when set. */
  token?: string;
  /** 0 = unlimited. */
  maxSessions?: number;
  /** Seconds a session may sit idle before it is closed (VAGEN: 3600). */
  sessionTimeout?: number;
  /** How often idle sessions are looked for, in seconds (VAGEN: 60). */
  cleanupInterval?: number;
  /** Concurrent requests admitted; 0 = unlimited. */
  maxInflight?: number;
  /** Seconds to wait for an admission slot before answering 503. */
  admitTimeout?: number;
  /** Called with one line per notable event (session created, closed, timed out). */
  log?: (line: string) => void;
}

interface Session {
  id: string;
  env: Env;
  createdAt: number;
  lastAccess: number;
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
  private readonly admission: Admission | null;
  private server: ReturnType<typeof Bun.serve> | null = null;
  private cleanupTimer: ReturnType<typeof setInterval> | null = null;
  private readonly options: Required<Omit<EnvServerOptions, "token" | "log">> & Pick<EnvServerOptions, "token" | "log">;

  constructor(options: EnvServerOptions) {
    this.options = {
      hostname: "127.0.0.1",
      port: 0,
      maxSessions: 0,
      sessionTimeout: 3600,
      cleanupInterval: 60,
      maxInflight: 0,
      admitTimeout: 5,
      ...options,
    };
    this.admission = this.options.maxInflight > 0 ? new Admission(this.options.maxInflight) : null;
  }

  /** Starts listening; returns the base URL (`http://host:port`). */
  start(): string {
    if (this.server) return this.url;
    this.server = Bun.serve({
      hostname: this.options.hostname,
      port: this.options.port,
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
    return `http://${this.options.hostname}:${this.port}`;
  }

  get sessionCount(): number {
    return this.sessions.size;
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
    const expired = [...this.sessions.values()].filter((s) => (now - s.lastAccess) / 1000 > this.options.sessionTimeout);
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
      this.authenticate(request);
      if (path === "/sessions") return Response.json(this.stats());
      const admitted = await this.admit();
      try {
        const body = new Uint8Array(await request.arrayBuffer());
        const { data } = decodeMultipart(request.headers.get("content-type") ?? "", body);
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

  private async admit(): Promise<boolean> {
    if (!this.admission) return false;
    if (await this.admission.acquire(this.options.admitTimeout * 1000)) return true;
    throw new HttpError(503, "server busy");
  }

  private stats() {
    const now = Date.now();
    return {
      num_sessions: this.sessions.size,
      max_sessions: this.options.maxSessions,
      session_timeout: this.options.sessionTimeout,
      sessions: [...this.sessions.values()].map((s) => {
        const idle = (now - s.lastAccess) / 1000;
        return {
          session_id: s.id,
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
    if (maxSessions > 0 && this.sessions.size >= maxSessions) {
      throw new HttpError(503, `Max sessions limit reached (${maxSessions}). Please try again later or close existing sessions.`);
    }
    const envConfig = isRecord(data.env_config) ? data.env_config : {};
    let env: Env;
    try {
      env = await this.options.createEnv(envConfig);
    } catch (err) {
      if (err instanceof VagenError) throw new HttpError(400, err.message);
      throw err;
    }
    const id = crypto.randomUUID().replaceAll("-", "");
    const now = Date.now();
    this.sessions.set(id, { id, env, createdAt: now, lastAccess: now });
    this.options.log?.(`session ${id} created (${this.sessions.size}/${maxSessions > 0 ? maxSessions : "unlimited"})`);
    const seed = data.seed;
    if (seed === undefined || seed === null) return multipart({ session_id: id });
    const { obs, info } = await env.reset(toSeed(seed));
    return multipart({ session_id: id, obs: obs.text, info }, obs.images);
  }

  private async call(data: Record<string, unknown>): Promise<Response> {
    const id = data.session_id;
    const method = data.method;
    if (typeof id !== "string" || !id) throw new HttpError(400, "session_id required");
    if (typeof method !== "string" || !method) throw new HttpError(400, "method required");
    const params = isRecord(data.params) ? data.params : {};
    const session = this.sessions.get(id);
    if (!session) throw new SessionNotFound(id);
    session.lastAccess = Date.now();
    switch (method) {
      case "system_prompt":
        return observationResponse(await session.env.systemPrompt(), {});
      case "reset": {
        const { obs, info } = await session.env.reset(toSeed(params.seed ?? 0));
        return observationResponse(obs, { info });
      }
      case "step": {
        const actionStr = typeof params.action_str === "string" ? params.action_str : "";
        const { obs, reward, done, info } = await session.env.step(actionStr);
        return observationResponse(obs, { reward, done, info });
      }
      case "close":
        this.sessions.delete(id);
        await session.env.close();
        this.options.log?.(`session ${id} closed (${this.sessions.size} remaining)`);
        return multipart({ closed: true });
      default:
        throw new HttpError(500, `Unknown method: ${method}`);
    }
  }
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
