/**
 * `vagen serve`'s HTTP API in-process over the tiny Qwen2.5-VL fixture: one engine per
 * test file, any number of servers over it (each with its own options), request logs
 * kept in memory.
 */
import { loadEngine, type LoadedEngine } from "../../src/engine/load.ts";
import { startServer, type ServerOptions } from "../../src/serve/server.ts";
import { FIXTURE_DIR } from "../models/fixture.ts";

export interface TestServer {
  url: string;
  /** Request-log lines written so far. */
  logs: string[];
  stop(): void;
}

export function loadFixtureEngine(): LoadedEngine {
  return loadEngine(FIXTURE_DIR, { device: "cpu", dtype: "f32", max_seq_len: 512, kv_cache_gib: 0.05, max_slots: 8 });
}

export function startTestServer(loaded: LoadedEngine, options: Partial<ServerOptions> = {}): TestServer {
  const logs: string[] = [];
  const server = startServer({ engine: loaded.engine, builder: loaded.builder, port: 0, ...options, log: { write: (line) => logs.push(line), ...options.log } });
  return { url: `http://127.0.0.1:${server.port}`, logs, stop: () => server.stop(true) };
}

export interface JsonAnswer {
  status: number;
  /** The parsed answer, read loosely: tests check the fields they care about. */
  body: any;
}

/** POST a JSON body (or raw text with its own content type) and read the JSON answer. */
export async function post(url: string, body: unknown, headers: Record<string, string> = {}): Promise<JsonAnswer> {
  const res = await fetch(url, {
    method: "POST",
    headers: { "content-type": "application/json", ...headers },
    body: typeof body === "string" ? body : JSON.stringify(body),
  });
  const text = await res.text();
  return { status: res.status, body: text ? JSON.parse(text) : null };
}

export const hello = (extra: Record<string, unknown> = {}) => ({ messages: [{ role: "user", content: "hi" }], max_tokens: 2, ...extra });
