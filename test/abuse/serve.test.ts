/**
 * `vagen serve` under abuse, as shipped: the compiled binary over the tiny fixture, hit
 * with oversized bodies, a PNG decompression bomb, missing and wrong API keys, the wrong
 * content type, concurrent clients and clients that hang up mid-stream. After each the
 * server must still answer, and its peak resident memory (VmHWM in /proc/PID/status)
 * must stay within a bound over what it held after start-up. Nothing here measures time.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { BINARY, haveBinary, vagen } from "../cli/binary.ts";
import { FIXTURE_DIR } from "../models/fixture.ts";
import { dataUrl, pngBomb } from "./serve-png.ts";

const KEY = "sk-abuse-test-key";
const AUTH = { authorization: `Bearer ${KEY}`, "content-type": "application/json" };
/**
 * Peak memory the abuse may add. Decoding the 16000x16000 bomb alone would need 1 GiB of
 * RGBA; buffering a 50 MB body and parsing it, several hundred MB.
 */
const MEMORY_BOUND_BYTES = 256 * 2 ** 20;

interface ServeProcess {
  proc: Bun.Subprocess<"ignore", "ignore", "pipe">;
  url: string;
  /** Everything the server wrote to stderr so far. */
  stderr: () => string;
}

async function startServe(): Promise<ServeProcess> {
  const proc = Bun.spawn(
    [BINARY, "serve", FIXTURE_DIR, "--port", "0", "--device", "cpu", "--dtype", "f32", "--max-seq-len", "512", "--kv-cache-gib", "0.05", "--max-slots", "8"],
    { cwd: tmpdir(), env: { ...process.env, OMP_NUM_THREADS: "2", VAGEN_API_KEY: KEY }, stdin: "ignore", stdout: "ignore", stderr: "pipe" },
  );
  let text = "";
  let announce!: (url: string) => void;
  const listening = new Promise<string>((resolve) => (announce = resolve));
  // Drained for the whole run, so the request log never fills the pipe and blocks the server.
  void (async () => {
    const decoder = new TextDecoder();
    for await (const bytes of proc.stderr) {
      text += decoder.decode(bytes, { stream: true });
      const match = /listening on (http:\/\/\S+)\/v1/.exec(text);
      if (match) announce(match[1]!);
    }
  })();
  const url = await Promise.race([listening, proc.exited.then((code) => Promise.reject(new Error(`vagen serve exited with ${code}:\n${text}`)))]);
  return { proc, url, stderr: () => text };
}

/** Bytes of a /proc/PID/status field (VmRSS, VmHWM). */
function memory(pid: number, field: "VmRSS" | "VmHWM"): number {
  const match = new RegExp(`^${field}:\\s+(\\d+) kB`, "m").exec(readFileSync(`/proc/${pid}/status`, "utf8"));
  if (!match) throw new Error(`/proc/${pid}/status has no ${field}`);
  return Number(match[1]) * 1024;
}

describe.skipIf(!haveBinary)("vagen serve (binary) under abuse", () => {
  let serve: ServeProcess;
  let baseline: number;

  const chat = (body: unknown, headers: Record<string, string> = AUTH, signal?: AbortSignal) =>
    fetch(`${serve.url}/v1/chat/completions`, { method: "POST", headers, body: typeof body === "string" ? body : JSON.stringify(body), signal });
  const hello = (extra: Record<string, unknown> = {}) => ({ messages: [{ role: "user", content: "hi" }], max_tokens: 4, ignore_eos: true, ...extra });

  /** The server answers a model listing and a short chat, and stays within its memory bound. */
  async function stillHealthy(): Promise<void> {
    expect(serve.proc.exitCode).toBeNull();
    expect((await fetch(`${serve.url}/v1/models`, { headers: AUTH })).status).toBe(200);
    const res = await chat(hello());
    expect(res.status).toBe(200);
    expect(((await res.json()) as { usage: { completion_tokens: number } }).usage.completion_tokens).toBe(4);
    expect(memory(serve.proc.pid, "VmHWM") - baseline).toBeLessThan(MEMORY_BOUND_BYTES);
  }

  beforeAll(async () => {
    serve = await startServe();
    // Warm up (first prefill and decode allocate their buffers), then take the peak so far.
    await (await chat(hello())).text();
    baseline = memory(serve.proc.pid, "VmHWM");
  });
  afterAll(async () => {
    serve?.proc.kill("SIGTERM");
    await serve?.proc.exited;
  });

  test("without the key, or with a wrong one: 401; never echoed into the log", async () => {
    expect((await fetch(`${serve.url}/v1/models`)).status).toBe(401);
    const wrong = await chat(hello(), { authorization: "Bearer sk-not-it", "content-type": "application/json" });
    expect(wrong.status).toBe(401);
    expect(((await wrong.json()) as { error: { code: string } }).error.code).toBe("invalid_api_key");
    await stillHealthy();
    expect(serve.stderr()).not.toContain(KEY);
  });

  test("a non-loopback address without a key is refused at start", () => {
    const env = { VAGEN_API_KEY: "" };
    const run = vagen(["serve", FIXTURE_DIR, "--host", "0.0.0.0", "--port", "0"], { env });
    expect(run.code).not.toBe(0);
    expect(run.stderr).toContain("--host 0.0.0.0 is reachable from other machines and no API key is set");
  });

  test("the wrong content type: 415", async () => {
    const res = await chat(JSON.stringify(hello()), { authorization: AUTH.authorization, "content-type": "text/plain;charset=UTF-8" });
    expect(res.status).toBe(415);
    await stillHealthy();
  });

  test("a 50 MB body: 413 from its Content-Length, before it is read", async () => {
    const res = await chat({ messages: [{ role: "user", content: "x".repeat(50 * 2 ** 20) }] });
    expect(res.status).toBe(413);
    expect(((await res.json()) as { error: { message: string } }).error.message).toContain(`at most ${32 * 2 ** 20}`);
    await stillHealthy();
  });

  test("a 50 MB chunked body: 413 once 32 MiB have arrived; to a path nobody reads, 404", async () => {
    const fiftyMegabytes = () => {
      const piece = new TextEncoder().encode("x".repeat(2 ** 20));
      let sent = 0;
      return new ReadableStream<Uint8Array>({
        pull(controller) {
          if (sent >= 50 * 2 ** 20) return controller.close();
          sent += piece.length;
          controller.enqueue(piece);
        },
      });
    };
    const res = await fetch(`${serve.url}/v1/chat/completions`, { method: "POST", headers: AUTH, body: fiftyMegabytes() });
    expect(res.status).toBe(413);
    expect(((await res.json()) as { error: { message: string } }).error.message).toContain(`more than ${32 * 2 ** 20}`);
    const elsewhere = await fetch(`${serve.url}/v1/nothing-here`, { method: "POST", headers: AUTH, body: fiftyMegabytes() }).catch((e: Error) => e);
    // Bun may answer the 404 and close the connection before the upload ends.
    if (!(elsewhere instanceof Error)) expect(elsewhere.status).toBe(404);
    await stillHealthy();
  });

  test("a 1.2 MB text part: 400 naming the sizes, not a 500", async () => {
    const res = await chat({ messages: [{ role: "user", content: [{ type: "text", text: "ab ".repeat(400_000) }] }] });
    expect(res.status).toBe(400);
    expect(((await res.json()) as { error: { message: string } }).error.message).toContain("1200000 bytes of text");
    await stillHealthy();
  });

  test("a 16000x16000 PNG bomb (750 KB that decodes to 1 GiB): 400 without decoding", async () => {
    const bomb = dataUrl(pngBomb(16000, 16000));
    const res = await chat(hello({ messages: [{ role: "user", content: [{ type: "image_url", image_url: { url: bomb } }, { type: "text", text: "?" }] }] }));
    expect(res.status).toBe(400);
    expect(((await res.json()) as { error: { message: string } }).error.message).toContain("16000x16000");
    await stillHealthy();
  });

  test("16 concurrent clients, streaming and not, all get their answers", async () => {
    const answers = await Promise.all(
      Array.from({ length: 16 }, async (_, i) => {
        const res = await chat(hello({ messages: [{ role: "user", content: `client ${i}` }], max_tokens: 8, stream: i % 2 === 0 }));
        return { status: res.status, text: await res.text() };
      }),
    );
    for (const [i, a] of answers.entries()) {
      expect(a.status).toBe(200);
      if (i % 2 === 0) expect(a.text).toEndWith("data: [DONE]\n\n");
      else expect(JSON.parse(a.text).usage.completion_tokens).toBe(8);
    }
    await stillHealthy();
  });

  test("clients that hang up mid-stream: their generations stop, the server keeps serving", async () => {
    const before = serve.stderr().split("\n").filter((l) => / 499 /.test(l)).length;
    await Promise.all(
      Array.from({ length: 8 }, async (_, i) => {
        const ctrl = new AbortController();
        const res = await chat(hello({ messages: [{ role: "user", content: `talk ${i}` }], max_tokens: 400, stream: true }), AUTH, ctrl.signal);
        const reader = res.body!.getReader();
        await reader.read(); // the first chunk: generation is under way
        ctrl.abort();
        await reader.read().catch(() => undefined);
      }),
    );
    await stillHealthy();
    // Every hang-up is logged as 499 once its generation has stopped (400 tokens each would take far longer to finish).
    for (let i = 0; i < 400 && serve.stderr().split("\n").filter((l) => / 499 /.test(l)).length < before + 8; i++) await Bun.sleep(25);
    expect(serve.stderr().split("\n").filter((l) => / 499 /.test(l)).length).toBe(before + 8);
  });

  test("SIGTERM ends the server cleanly", async () => {
    await stillHealthy();
    serve.proc.kill("SIGTERM");
    expect(await serve.proc.exited).toBe(0);
  });
});
