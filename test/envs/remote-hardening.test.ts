/**
 * The env server closed by default: token rules, browser requests, content types, body
 * and session limits, image parts left undecoded, impossible configs answered with 400
 * while the server keeps serving; the client keeps secrets out of its errors.
 */
import { afterEach, describe, expect, test } from "bun:test";
import { deflateSync } from "node:zlib";
import * as v from "valibot";
import { createEnv } from "../../envs/registry.ts";
import { RemoteEnv, RemoteEnvError, redactUrl, remoteEnvConfigSchema } from "../../envs/remote/client.ts";
import { encodeMultipart, requestContentType } from "../../envs/remote/multipart.ts";
import { EnvServer, isLoopback } from "../../envs/remote/server.ts";
import { VagenError } from "../../src/core/errors.ts";
import { pngWithHeader } from "../core/fixtures/png-bomb.ts";

const servers: EnvServer[] = [];
afterEach(async () => {
  await Promise.all(servers.splice(0).map((s) => s.stop()));
});

function startServer(options: Partial<ConstructorParameters<typeof EnvServer>[0]> = {}): EnvServer {
  const server = new EnvServer({ createEnv: (config) => createEnv("Sokoban", config), ...options });
  server.start();
  servers.push(server);
  return server;
}

function client(config: Record<string, unknown>): RemoteEnv {
  return new RemoteEnv(v.parse(remoteEnvConfigSchema, { retries: 0, backoff: 0.001, log_retries: false, timeout: 30, ...config }));
}

/** Posts a protocol body (with optional raw image parts) and returns status and JSON detail. */
async function post(url: string, data: Record<string, unknown>, extra: { images?: Uint8Array[]; headers?: Record<string, string> } = {}) {
  const { boundary, body } = encodeMultipart(data);
  let bytes = body;
  if (extra.images?.length) {
    const closing = new TextEncoder().encode(`--${boundary}--\r\n`);
    const parts = extra.images.map((png, i) =>
      Buffer.concat([
        Buffer.from(`--${boundary}\r\nContent-Disposition: form-data; name="images"; filename="${i}.png"\r\nContent-Type: image/png\r\n\r\n`),
        Buffer.from(png),
        Buffer.from("\r\n"),
      ]),
    );
    bytes = Buffer.concat([Buffer.from(body.subarray(0, body.length - closing.length)), ...parts, Buffer.from(closing)]);
  }
  const res = await fetch(url, { method: "POST", body: bytes as Uint8Array<ArrayBuffer>, headers: { "content-type": requestContentType(boundary), ...extra.headers } });
  const text = await res.text();
  return { status: res.status, text };
}

describe("who may talk to the server", () => {
  test("no token on a non-loopback address: refused unless insecure", () => {
    const open = new EnvServer({ createEnv: async () => createEnv("Sokoban"), hostname: "0.0.0.0" });
    expect(() => open.start()).toThrow(VagenError);
    expect(() => open.start()).toThrow(/refusing to serve on 0\.0\.0\.0 without a token/);
    servers.push(new EnvServer({ createEnv: async () => createEnv("Sokoban"), hostname: "0.0.0.0", token: "t" }));
    expect(servers.at(-1)!.start()).toContain(":");
    servers.push(new EnvServer({ createEnv: async () => createEnv("Sokoban"), hostname: "0.0.0.0", insecure: true }));
    expect(servers.at(-1)!.start()).toContain(":");
    expect([isLoopback("127.0.0.1"), isLoopback("127.8.0.1"), isLoopback("localhost"), isLoopback("[::1]")]).toEqual([true, true, true, true]);
    expect([isLoopback("0.0.0.0"), isLoopback("10.0.0.1"), isLoopback("::"), isLoopback("127.0.0.1.example.com")]).toEqual([false, false, false, false]);
  });

  test("an open server counts sessions but never lists their ids", async () => {
    const server = startServer();
    const remote = client({ base_urls: server.url });
    await remote.reset(1);
    const stats = (await (await fetch(`${server.url}/sessions`)).json()) as { num_sessions: number; sessions: Record<string, unknown>[] };
    expect(stats.num_sessions).toBe(1);
    expect(stats.sessions[0]).not.toHaveProperty("session_id");
    expect(JSON.stringify(stats)).not.toContain(remote.session!);
  });

  test("text/plain, JSON or no content type: 415; a web page's request (Origin): 403", async () => {
    const server = startServer();
    for (const type of ["text/plain", "application/x-www-form-urlencoded", "application/json"]) {
      const res = await fetch(`${server.url}/connect`, { method: "POST", body: '{"env_config": {}}', headers: { "content-type": type } });
      expect(res.status).toBe(415);
      expect(((await res.json()) as { detail: string }).detail).toContain("expected a multipart/form-data body");
    }
    const fromPage = await post(`${server.url}/connect`, { env_config: {} }, { headers: { origin: "https://example.com" } });
    expect(fromPage.status).toBe(403);
    const fetchMetadata = await post(`${server.url}/connect`, { env_config: {} }, { headers: { "sec-fetch-site": "cross-site" } });
    expect(fetchMetadata.status).toBe(403);
    expect(server.sessionCount).toBe(0);
  });
});

describe("limits", () => {
  test("bodies over the limit: 413 with the numbers, nothing read", async () => {
    const server = startServer({ maxBodyBytes: 1000 });
    const big = await post(`${server.url}/call`, { session_id: "x", method: "step", params: { action_str: "a".repeat(5000) } });
    expect(big.status).toBe(413);
    expect(JSON.parse(big.text).detail).toMatch(/^request body of \d+ bytes is over the limit of 1000 bytes$/);
    // Without a Content-Length (chunked), reading stops at the limit.
    const stream = new ReadableStream({
      start(controller) {
        for (let i = 0; i < 10; i++) controller.enqueue(new Uint8Array(500));
        controller.close();
      },
    });
    const chunked = await fetch(`${server.url}/call`, { method: "POST", body: stream, headers: { "content-type": 'multipart/form-data; boundary="b"' } });
    expect(chunked.status).toBe(413);
    expect(((await chunked.json()) as { detail: string }).detail).toBe("request body of more than 1000 bytes is over the limit of 1000 bytes");
    expect((await fetch(`${server.url}/health`)).status).toBe(200);
  });

  test("image parts of requests are never decoded: a PNG bomb costs nothing", async () => {
    const server = startServer();
    const remote = client({ base_urls: server.url });
    await remote.reset(2);
    const bomb = pngWithHeader(16000, 16000, deflateSync(new Uint8Array(4_000_000)));
    const rssBefore = process.memoryUsage().rss;
    const res = await post(`${server.url}/call`, { session_id: remote.session, method: "step", params: { action_str: "<answer>Up</answer>" } }, { images: [bomb, bomb] });
    expect(res.status).toBe(200);
    // Decoding one would take about 1.8 GB; anything near that would be a decode.
    expect(process.memoryUsage().rss - rssBefore).toBeLessThan(200 * 1024 * 1024);
  });

  test("defaults: sessions limited, idle timeout swept at a tenth of the timeout", () => {
    const server = new EnvServer({ createEnv: async () => createEnv("Sokoban") });
    expect(server.limits).toEqual({ maxSessions: 256, sessionTimeout: 600, cleanupInterval: 60, maxInflight: 64, maxBodyBytes: 8 * 1024 * 1024 });
    expect(new EnvServer({ createEnv: async () => createEnv("Sokoban"), sessionTimeout: 1 }).limits.cleanupInterval).toBe(0.1);
  });

  test("--session-timeout 0.2: the idle session is gone within a few sweeps, not a minute", async () => {
    const server = startServer({ sessionTimeout: 0.2 });
    const remote = client({ base_urls: server.url });
    await remote.reset(3);
    expect(server.sessionCount).toBe(1);
    // Wait on the sweeper itself: the test ends as soon as the session is closed.
    for (let i = 0; i < 100 && server.sessionCount > 0; i++) await Bun.sleep(50);
    expect(server.sessionCount).toBe(0);
  });

  test("a session busy with a long request is not timed out under it", async () => {
    let release!: () => void;
    const gate = new Promise<void>((resolve) => (release = resolve));
    const slow = {
      reset: async () => ({ obs: { text: "ready", images: [] }, info: {} }),
      step: async () => {
        await gate;
        return { obs: { text: "done", images: [] }, reward: 0, done: false, info: {} };
      },
      systemPrompt: async () => ({ text: "", images: [] }),
      close: async () => {},
    };
    const server = startServer({ createEnv: async () => slow, sessionTimeout: 30 });
    const remote = client({ base_urls: server.url });
    await remote.reset(0);
    const pending = remote.step("x");
    await Bun.sleep(20);
    expect(await server.closeIdleSessions(Date.now() + 60_000)).toBe(0);
    release();
    expect((await pending).obs.text).toBe("done");
  });
});

describe("configs that cannot be met", () => {
  test("/connect answers 400 naming the config, leaves no session, and /health answers meanwhile", async () => {
    const server = startServer();
    const connect = post(`${server.url}/connect`, { env_config: { dim_room: [16, 16], num_boxes: 12, max_generation_states: 1 }, seed: 1 });
    let connectDone = false;
    void connect.then(() => (connectDone = true));
    const health = await fetch(`${server.url}/health`);
    expect(health.status).toBe(200);
    expect(connectDone).toBe(false); // /health was answered while the level was being searched
    const res = await connect;
    expect(res.status).toBe(400);
    expect(JSON.parse(res.text).detail).toMatch(/^Sokoban: could not generate a level with dim_room=\[16,16\], num_boxes=12 in 1 tries, \d+ states searched \(max_generation_states=1\)/);
    expect(server.sessionCount).toBe(0);
  });

  test("the max-sessions check counts connects still generating", async () => {
    const server = startServer({ maxSessions: 1 });
    const [a, b] = await Promise.all([
      post(`${server.url}/connect`, { env_config: { dim_room: [16, 16], num_boxes: 3 }, seed: 0 }),
      (async () => {
        await Bun.sleep(5);
        return post(`${server.url}/connect`, { env_config: {}, seed: 0 });
      })(),
    ]);
    expect(a.status).toBe(200);
    expect(b.status).toBe(503);
    expect(server.sessionCount).toBe(1);
  });
});

describe("client secrets", () => {
  test("token_env reads the token from the environment; a missing variable is a clear error", async () => {
    const server = startServer({ token: "from-env-secret" });
    process.env.VAGEN_TEST_ENV_TOKEN = "from-env-secret";
    try {
      const remote = client({ base_urls: server.url, token_env: "VAGEN_TEST_ENV_TOKEN" });
      expect((await remote.reset(1)).obs.text).toContain("[Initial Observation]");
    } finally {
      delete process.env.VAGEN_TEST_ENV_TOKEN;
    }
    expect(() => client({ base_urls: server.url, token_env: "VAGEN_TEST_ENV_TOKEN" })).toThrow(
      "RemoteEnv: token_env names the environment variable VAGEN_TEST_ENV_TOKEN, which is not set",
    );
    expect(() => v.parse(remoteEnvConfigSchema, { token_env: "not a name" })).toThrow();
  });

  test("errors name the server without credentials or the token", async () => {
    expect(redactUrl("http://user:hunter2@host:8000/x?token=abc&seed=1")).toBe("http://***@host:8000/x?token=***&seed=1");
    const dead = startServer();
    const url = dead.url.replace("http://", "http://admin:hunter2@");
    await dead.stop();
    const remote = client({ base_urls: `${url}/?api_key=k3y`, token: "tok-123", retries: 1 });
    const err = await remote.reset(0).catch((e) => e);
    expect(err).toBeInstanceOf(RemoteEnvError);
    expect(err.message).not.toContain("hunter2");
    expect(err.message).not.toContain("k3y");
    expect(err.message).not.toContain("tok-123");
    expect(err.message).toContain("***@127.0.0.1");
  });
});
