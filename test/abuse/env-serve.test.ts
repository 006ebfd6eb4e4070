/**
 * `vagen env serve` from the compiled binary, treated as an attacker would: oversized
 * bodies, a PNG bomb upload, a config whose level cannot be generated while /health must
 * keep answering, many concurrent clients, clients that disconnect mid-request, and
 * SIGTERM in the middle of a generation. Skipped when dist/vagen is not built (see
 * test/cli/binary.ts).
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { tmpdir } from "node:os";
import { deflateSync } from "node:zlib";
import * as v from "valibot";
import { RemoteEnv, remoteEnvConfigSchema } from "../../envs/remote/client.ts";
import { encodeMultipart, requestContentType } from "../../envs/remote/multipart.ts";
import { BINARY, haveBinary } from "../cli/binary.ts";
import { pngWithHeader } from "../core/fixtures/png-bomb.ts";

const TOKEN = "abuse-t0ken";

interface Served {
  proc: ReturnType<typeof Bun.spawn>;
  url: string;
}

/** Starts `vagen env serve` and waits for its banner line. */
async function serve(args: string[]): Promise<Served> {
  const proc = Bun.spawn([BINARY, "env", "serve", ...args, "--port", "0", "--token", TOKEN], { cwd: tmpdir(), stdout: "pipe", stderr: "pipe" });
  const reader = (proc.stdout as ReadableStream<Uint8Array>).getReader();
  let banner = "";
  while (!banner.includes("\n")) {
    const { value, done } = await reader.read();
    if (done) throw new Error(`env serve exited before its banner: ${await new Response(proc.stderr as ReadableStream).text()}`);
    banner += new TextDecoder().decode(value);
  }
  reader.releaseLock();
  return { proc, url: /at (http:\/\/\S+)/.exec(banner)![1]! };
}

function client(url: string): RemoteEnv {
  return new RemoteEnv(v.parse(remoteEnvConfigSchema, { base_urls: url, token: TOKEN, retries: 0, log_retries: false, timeout: 60 }));
}

/** A protocol request with raw extra image parts (never sent by a real client). */
function protocolBody(data: Record<string, unknown>, images: Uint8Array[] = []): { body: Uint8Array; type: string } {
  const { boundary, body } = encodeMultipart(data);
  const closing = Buffer.from(`--${boundary}--\r\n`);
  const parts = images.map((png) =>
    Buffer.concat([Buffer.from(`--${boundary}\r\nContent-Disposition: form-data; name="images"; filename="0.png"\r\nContent-Type: image/png\r\n\r\n`), Buffer.from(png), Buffer.from("\r\n")]),
  );
  return { body: Buffer.concat([Buffer.from(body.subarray(0, body.length - closing.length)), ...parts, closing]), type: requestContentType(boundary) };
}

async function post(url: string, data: Record<string, unknown>, images: Uint8Array[] = [], signal?: AbortSignal): Promise<Response> {
  const { body, type } = protocolBody(data, images);
  return fetch(url, { method: "POST", body: body as Uint8Array<ArrayBuffer>, headers: { "content-type": type, "x-api-key": TOKEN }, signal });
}

function rssKb(pid: number): number {
  const status = require("node:fs").readFileSync(`/proc/${pid}/status`, "utf8") as string;
  return Number(/VmRSS:\s+(\d+)/.exec(status)![1]);
}

describe.skipIf(!haveBinary)("vagen env serve (binary) under abuse", () => {
  let server: Served;
  beforeAll(async () => {
    server = await serve(["Sokoban", "--max-body-bytes", "200000", "--max-sessions", "40"]);
  }, 20_000);
  afterAll(async () => {
    server.proc.kill("SIGTERM");
    await server.proc.exited;
  });

  test("oversized bodies: 413 with the numbers; the server carries on", async () => {
    const res = await post(`${server.url}/connect`, { env_config: { junk: "x".repeat(1_000_000) } });
    expect(res.status).toBe(413);
    expect(((await res.json()) as { detail: string }).detail).toMatch(/over the limit of 200000 bytes/);
    expect((await fetch(`${server.url}/health`)).status).toBe(200);
  });

  test("a PNG bomb uploaded with a step is never decoded", async () => {
    const env = client(server.url);
    await env.reset(1);
    const before = rssKb(server.proc.pid);
    const bomb = pngWithHeader(16000, 16000, deflateSync(new Uint8Array(10_000_000)));
    const res = await post(`${server.url}/call`, { session_id: env.session, method: "step", params: { action_str: "<answer>Up</answer>" } }, [bomb]);
    expect(res.status).toBe(200);
    // One decode would need gigabytes; the upload itself is about 10 KB.
    expect(rssKb(server.proc.pid) - before).toBeLessThan(150 * 1024);
    await env.close();
  });

  test("an impossible config on /connect: 400 naming it, while /health keeps answering", async () => {
    let connectDone = false;
    const connect = post(`${server.url}/connect`, { env_config: { dim_room: [24, 24], num_boxes: 20, max_generation_states: 1 }, seed: 1 }).then((res) => {
      connectDone = true;
      return res;
    });
    for (let i = 0; i < 5; i++) {
      const health = await fetch(`${server.url}/health`);
      expect(health.status).toBe(200);
    }
    expect(connectDone).toBe(false); // five health checks answered during the search
    const res = await connect;
    expect(res.status).toBe(400);
    expect(((await res.json()) as { detail: string }).detail).toContain("(max_generation_states=1)");
    const stats = (await (await fetch(`${server.url}/sessions?token=${TOKEN}`)).json()) as { num_sessions: number };
    expect(stats.num_sessions).toBe(0);
  }, 20_000);

  test("30 concurrent clients play side by side, and each gets its own level", async () => {
    const envs = Array.from({ length: 30 }, () => client(server.url));
    const resets = await Promise.all(envs.map((env, i) => env.reset(i)));
    const steps = await Promise.all(envs.map((env) => env.step("<think>t</think><answer>Left</answer>")));
    expect(new Set(envs.map((env) => env.session)).size).toBe(30);
    expect(new Set(resets.map((r) => r.obs.text)).size).toBeGreaterThan(20);
    for (const step of steps) expect(step.obs.text).toContain("After your answer");
    await Promise.all(envs.map((env) => env.close()));
  });

  test("clients that disconnect mid-request leave a working server", async () => {
    const aborted = Array.from({ length: 10 }, (_, i) => {
      const controller = new AbortController();
      const pending = post(`${server.url}/connect`, { env_config: { dim_room: [16, 16], num_boxes: 3 }, seed: i }, [], controller.signal).catch((e) => e);
      setTimeout(() => controller.abort(), 20);
      return pending;
    });
    await Promise.all(aborted);
    // A half-sent body: the socket closes before the declared length arrives.
    const socket = await Bun.connect({ hostname: "127.0.0.1", port: Number(new URL(server.url).port), socket: { data() {} } });
    socket.write(`POST /connect HTTP/1.1\r\nHost: x\r\nx-api-key: ${TOKEN}\r\nContent-Type: multipart/form-data; boundary=b\r\nContent-Length: 100000\r\n\r\n--b\r\n`);
    socket.end();
    const env = client(server.url);
    expect((await env.reset(5)).obs.text).toContain("[Initial Observation]");
    await env.close();
  });

  test("SIGTERM during a long generation stops the server at once", async () => {
    const other = await serve(["Sokoban"]);
    const connect = post(`${other.url}/connect`, { env_config: { dim_room: [32, 32], num_boxes: 30 }, seed: 1 }).catch((e) => e);
    await Bun.sleep(300); // inside the search
    other.proc.kill("SIGTERM");
    const outcome = await Promise.race([other.proc.exited.then((code) => `exited ${code}`), Bun.sleep(5000).then(() => "still running")]);
    other.proc.kill("SIGKILL");
    await connect;
    expect(outcome).toBe("exited 0");
  }, 20_000);
});
