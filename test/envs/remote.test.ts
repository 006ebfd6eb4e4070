import { afterEach, describe, expect, test } from "bun:test";
import { encodePng } from "../../src/core/png.ts";
import type { Env } from "../../envs/_common/types.ts";
import { createEnv } from "../../envs/registry.ts";
import { RemoteEnv, RemoteEnvError, parseUrls, remoteEnvConfigSchema } from "../../envs/remote/client.ts";
import { decodeMultipart, encodeMultipart } from "../../envs/remote/multipart.ts";
import { EnvServer } from "../../envs/remote/server.ts";
import * as v from "valibot";

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
  return new RemoteEnv(v.parse(remoteEnvConfigSchema, { retries: 0, backoff: 0.001, log_retries: false, timeout: 10, ...config }));
}

const answer = (a: string) => `<observation>o</observation><think>t</think><answer>${a}</answer><prediction>p</prediction>`;

describe("multipart codec", () => {
  test("matches VAGEN's layout byte for byte", () => {
    const { boundary, body } = encodeMultipart({ a: "é" }, [], "gym_env_abc");
    expect(boundary).toBe("gym_env_abc");
    expect(new TextDecoder().decode(body)).toBe(
      '--gym_env_abc\r\nContent-Disposition: form-data; name="data"\r\nContent-Type: application/json; charset=utf-8\r\n\r\n{"a":"é"}\r\n--gym_env_abc--\r\n',
    );
  });

  test("round trip with images, quoted boundary", () => {
    const img = { width: 3, height: 2, data: new Uint8Array(18).map((_, i) => i * 13) };
    const { boundary, body } = encodeMultipart({ obs: "x", n: [1, 2] }, [img, img]);
    const text = new TextDecoder("latin1").decode(body);
    expect(text).toContain('Content-Disposition: form-data; name="images"; filename="1.png"\r\nContent-Type: image/png\r\n\r\n');
    const decoded = decodeMultipart(`multipart/mixed; boundary="${boundary}"`, body);
    expect(decoded.data).toEqual({ obs: "x", n: [1, 2] });
    expect(decoded.images).toEqual([img, img]);
  });

  test("non-object JSON is wrapped, invalid JSON kept raw, missing boundary rejected", () => {
    const raw = (json: string) => new TextEncoder().encode(`--b\r\nContent-Type: application/json\r\n\r\n${json}\r\n--b--\r\n`);
    expect(decodeMultipart("multipart/mixed; boundary=b", raw("[1,2]")).data).toEqual({ _data: [1, 2] });
    expect(decodeMultipart("multipart/mixed; boundary=b", raw("{oops")).data).toEqual({ _data_raw: "{oops" });
    expect(() => decodeMultipart("multipart/mixed", raw("{}"))).toThrow(/Missing boundary/);
  });

  test("URL lists parse like VAGEN's client", () => {
    expect(parseUrls("http://a:1; http://b:2/\n# comment\n\nhttp://c:3")).toEqual(["http://a:1", "http://b:2", "http://c:3"]);
    expect(parseUrls(["http://a:1 ", ""])).toEqual(["http://a:1"]);
  });
});

describe("server and client over HTTP", () => {
  test("a remote env behaves exactly like the local one (vision, images included)", async () => {
    const server = startServer();
    const health = await (await fetch(`${server.url}/health`)).json();
    expect(health).toEqual({ ok: true, service: "gym-env-service", max_inflight: 64 });

    const config = { render_mode: "vision", min_solution_steps: [1, 4] };
    const remote = client({ base_urls: server.url, ...config });
    const local = await createEnv("Sokoban", config);
    expect(remote.session).toBeNull(); // no request before the first reset
    const [r, l] = [await remote.reset(5), await local.reset(5)];
    expect(remote.session).toMatch(/^[0-9a-f]{32}$/);
    expect(r.obs.text).toBe(l.obs.text);
    expect(r.info).toEqual(JSON.parse(JSON.stringify(l.info)));
    expect(encodePng(r.obs.images[0]!)).toEqual(encodePng(l.obs.images[0]!));
    expect((await remote.systemPrompt()).text).toBe((await local.systemPrompt()).text);
    for (const a of ["Up", "Left", "jump", "Down"]) {
      const [rs, ls] = [await remote.step(answer(a)), await local.step(answer(a))];
      expect(rs.obs.text).toBe(ls.obs.text);
      expect(rs.reward).toBe(ls.reward);
      expect(rs.done).toBe(ls.done);
      expect(rs.obs.images[0]!.data).toEqual(ls.obs.images[0]!.data);
    }
    expect((await remote.reset(6)).obs.text).toBe((await local.reset(6)).obs.text); // second reset goes through /call
    expect(server.sessionCount).toBe(1);
    await remote.close();
    expect(server.sessionCount).toBe(0);
    expect(remote.session).toBeNull();
  });

  test("client keys stay local; other keys configure the server env", async () => {
    const server = startServer({ createEnv: (config) => createEnv("FrozenLake", config) });
    const remote = client({ base_urls: [server.url], desc: ["SFG"], prompt_format: "free_think" });
    const { obs } = await remote.reset(0);
    expect(obs.text).toContain(" P  _  G ");
    const bad = client({ base_urls: server.url, size: "big" });
    const err = await bad.reset(0).catch((e) => e);
    expect(err).toBeInstanceOf(RemoteEnvError);
    expect(err.status).toBe(400);
    expect(err.message).toContain('key "size"');
  });

  test("bearer token: header or query accepted, wrong or missing token gets 401 without retries", async () => {
    const server = startServer({ token: "s3cret" });
    const good = client({ base_urls: server.url, token: "s3cret" });
    expect((await good.reset(1)).obs.text).toContain("[Initial Observation]");
    const bad = client({ base_urls: server.url, token: "nope", retries: 5, backoff: 10 });
    const err = await bad.reset(1).catch((e) => e);
    expect(err).toBeInstanceOf(RemoteEnvError);
    expect(err.status).toBe(401);
    expect(err.message).toContain("unauthorized");
    expect((await fetch(`${server.url}/sessions`)).status).toBe(401);
    const stats = (await (await fetch(`${server.url}/sessions?token=s3cret`)).json()) as { num_sessions: number; sessions: { session_id: string }[] };
    expect(stats.num_sessions).toBe(1);
    expect(stats.sessions[0]!.session_id).toBe(good.session!);
    expect((await fetch(`${server.url}/health`)).status).toBe(200); // health needs no token
  });

  test("error codes: unknown session 404, missing fields 400, unknown method 500, bad route 404", async () => {
    const server = startServer();
    const post = async (data: Record<string, unknown>) => {
      const { boundary, body } = encodeMultipart(data);
      const res = await fetch(`${server.url}/call`, { method: "POST", body: body as Uint8Array<ArrayBuffer>, headers: { "content-type": `multipart/form-data; boundary="${boundary}"` } });
      return { status: res.status, body: (await res.json()) as { detail: string } };
    };
    expect(await post({ session_id: "deadbeef", method: "step", params: {} })).toEqual({ status: 404, body: { detail: "Session deadbeef not found" } });
    expect((await post({ method: "step" })).status).toBe(400);
    expect((await post({ session_id: "x" })).body.detail).toBe("method required");
    const remote = client({ base_urls: server.url });
    await remote.reset(0);
    expect(await post({ session_id: remote.session, method: "fly" })).toEqual({ status: 500, body: { detail: "Unknown method: fly" } });
    expect((await fetch(`${server.url}/nowhere`)).status).toBe(404);
    expect((await fetch(`${server.url}/connect`)).status).toBe(405);
  });

  test("step before reset is an error, not a request", async () => {
    const remote = client({ base_urls: "http://127.0.0.1:9" });
    await expect(remote.step("x")).rejects.toThrow(/before reset/);
    await expect(remote.systemPrompt()).rejects.toThrow(/before reset/);
  });

  test("max sessions: 503 at connect", async () => {
    const server = startServer({ maxSessions: 1 });
    await client({ base_urls: server.url }).reset(0);
    const err = await client({ base_urls: server.url }).reset(0).catch((e) => e);
    expect(err.status).toBe(503);
    expect(err.message).toContain("Max sessions limit reached (1)");
  });

  test("idle sessions time out; the client then reconnects on reset", async () => {
    const server = startServer({ sessionTimeout: 30 });
    const remote = client({ base_urls: server.url });
    await remote.reset(3);
    expect(await server.closeIdleSessions(Date.now())).toBe(0);
    expect(await server.closeIdleSessions(Date.now() + 31_000)).toBe(1);
    const err = await remote.step(answer("Up")).catch((e) => e);
    expect(err.status).toBe(404);
    expect(err.message).toContain("reset() starts a new session");
    const again = await remote.reset(3);
    expect(again.obs.text).toContain("[Initial Observation]");
    expect(server.sessionCount).toBe(1);
  });

  test("server restart on the same port: step reports the lost session, reset recovers", async () => {
    const first = startServer();
    const port = first.port;
    const remote = client({ base_urls: first.url });
    const before = await remote.reset(8);
    await first.stop();
    const second = startServer({ port });
    const err = await remote.step(answer("Up")).catch((e) => e);
    expect(err).toBeInstanceOf(RemoteEnvError);
    expect(err.status).toBe(404);
    const after = await remote.reset(8);
    expect(after.obs.text).toBe(before.obs.text);
    expect(second.sessionCount).toBe(1);
  });

  test("connection failures are retried and fail over to the next URL", async () => {
    const dead = startServer();
    const deadUrl = dead.url;
    await dead.stop();
    const live = startServer();
    const remote = client({ base_urls: [deadUrl, live.url], retries: 2, failover_after_failures: 0 });
    const { obs } = await remote.reset(1);
    expect(obs.text).toContain("[Initial Observation]");
    expect(remote.currentBaseUrl).toBe(live.url);
    const onlyDead = client({ base_urls: deadUrl, retries: 2 });
    const err = await onlyDead.reset(1).catch((e) => e);
    expect(err).toBeInstanceOf(RemoteEnvError);
    expect(err.message).toContain("after 3 attempt(s)");
  });

  test("admission control answers 503 when every slot stays busy", async () => {
    let release!: () => void;
    const gate = new Promise<void>((resolve) => (release = resolve));
    const slow: Env = {
      reset: async () => ({ obs: { text: "ready", images: [] }, info: {} }),
      step: async () => {
        await gate;
        return { obs: { text: "done", images: [] }, reward: 0, done: false, info: {} };
      },
      systemPrompt: async () => ({ text: "", images: [] }),
      close: async () => {},
    };
    const server = startServer({ createEnv: async () => slow, maxInflight: 1, admitTimeout: 0.05 });
    const a = client({ base_urls: server.url });
    const b = client({ base_urls: server.url });
    await a.reset(0);
    await b.reset(0);
    const pending = a.step("x");
    await Bun.sleep(20);
    const err = await b.step("y").catch((e) => e);
    expect(err.status).toBe(503);
    expect(err.message).toContain("server busy");
    release();
    expect((await pending).obs.text).toBe("done");
  });
});
