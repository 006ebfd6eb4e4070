/**
 * The format preflight asks each env as the agent loop does, reset first and then the
 * system prompt, so it works with a remote env (which has no session, and so no system
 * prompt, before its first reset); and an env server that is down fails the preflight
 * with an error naming the env's config key, instead of a hang or a bare network error.
 */
import { afterEach, describe, expect, test } from "bun:test";
import { join } from "node:path";
import type { Env, Observation } from "../../envs/_common/types.ts";
import { createEnv } from "../../envs/registry.ts";
import { VagenError } from "../../src/core/errors.ts";
import { checkResponseFormats, type ReplyCodec } from "../../src/training/preflight.ts";

const MAIN = join(import.meta.dir, "..", "..", "src", "cli", "main.ts");
const TOKEN = "preflight-t0ken";
const KEY = 'train.yaml: key "data.train.sokoban"';

/** A tokenizer that keeps every character: no tag is lost. */
const plain: ReplyCodec = { encode: (text) => Array.from(text, (c) => c.codePointAt(0)!), decode: (ids) => String.fromCodePoint(...ids) };
/** One that holds `<answer>` as a special token: decoded replies lose it. */
const losesAnswer: ReplyCodec = { encode: plain.encode, decode: (ids) => plain.decode(ids).replaceAll("<answer>", "") };

interface Served {
  proc: ReturnType<typeof Bun.spawn>;
  url: string;
}
const servers: Served[] = [];
afterEach(async () => {
  for (const s of servers.splice(0)) {
    s.proc.kill("SIGKILL");
    await s.proc.exited;
  }
});

/** `vagen env serve Sokoban` (from source) on a free port; resolves once its banner names the URL. */
async function serveSokoban(): Promise<Served> {
  const proc = Bun.spawn(["bun", MAIN, "env", "serve", "Sokoban", "--port", "0", "--token", TOKEN], { stdout: "pipe", stderr: "pipe" });
  const reader = (proc.stdout as ReadableStream<Uint8Array>).getReader();
  let banner = "";
  while (!banner.includes("\n")) {
    const { value, done } = await reader.read();
    if (done) throw new Error(`env serve exited before its banner: ${await new Response(proc.stderr as ReadableStream).text()}`);
    banner += new TextDecoder().decode(value);
  }
  reader.releaseLock();
  const served = { proc, url: /at (http:\/\/\S+)/.exec(banner)![1]! };
  servers.push(served);
  return served;
}

/** The preflight's entry for a RemoteEnv of `url`, retrying nothing so a dead server fails at once. */
const remoteEntry = (url: string) => ({
  key: KEY,
  create: () => createEnv("RemoteEnv", { base_urls: url, token: TOKEN, retries: 0, log_retries: false, timeout: 30, prompt_format: "wm" }),
});

async function failure(run: Promise<void>): Promise<VagenError> {
  try {
    await run;
  } catch (err) {
    expect(err).toBeInstanceOf(VagenError);
    return err as VagenError;
  }
  throw new Error("expected the preflight to fail");
}

describe("format preflight and the env contract", () => {
  test("each env is reset with the entry's seed before its system prompt is asked for, then closed", async () => {
    const calls: string[] = [];
    // Like a RemoteEnv: no system prompt before the first reset.
    const strict = async (): Promise<Env> => {
      let reset = false;
      return {
        reset: async (seed) => {
          calls.push(`reset ${seed}`);
          reset = true;
          return { obs: { text: "start", images: [] }, info: {} };
        },
        step: async () => ({ obs: { text: "", images: [] }, reward: 0, done: true, info: {} }),
        systemPrompt: async (): Promise<Observation> => {
          if (!reset) throw new Error("systemPrompt() before reset()");
          calls.push("systemPrompt");
          return { text: "Reply as <answer>...</answer>", images: [] };
        },
        close: async () => void calls.push("close"),
      };
    };
    await checkResponseFormats([{ key: KEY, create: strict, seed: 7 }, { key: KEY, create: strict }], plain);
    expect(calls).toEqual(["reset 7", "systemPrompt", "close", "reset 0", "systemPrompt", "close"]);
  });

  test("an env that fails to reset fails the preflight naming its key; it is still closed", async () => {
    let closed = false;
    const broken = async (): Promise<Env> => ({
      reset: async () => {
        throw new Error("level generation failed");
      },
      step: async () => ({ obs: { text: "", images: [] }, reward: 0, done: true, info: {} }),
      systemPrompt: async () => ({ text: "", images: [] }),
      close: async () => void (closed = true),
    });
    const err = await failure(checkResponseFormats([{ key: KEY, create: broken }], plain));
    expect(err.message).toBe(`${KEY}: the env did not answer the format check (reset with seed 0, then the system prompt): level generation failed`);
    expect(closed).toBe(true);
  });
});

describe("format preflight against a real `vagen env serve`", () => {
  test("a RemoteEnv's system prompt comes from the server: a kept format passes, a lost tag names the env key", async () => {
    const { url } = await serveSokoban();
    await checkResponseFormats([remoteEntry(url)], plain);
    const err = await failure(checkResponseFormats([remoteEntry(url)], losesAnswer));
    expect(err.message).toStartWith(`${KEY}: the response format uses <answer>`);
  }, 60_000);

  test("a server that was killed: the preflight fails at once with an error naming the env key and the server", async () => {
    const served = await serveSokoban();
    served.proc.kill("SIGKILL");
    await served.proc.exited;
    const err = await failure(checkResponseFormats([remoteEntry(served.url)], plain));
    expect(err.message).toStartWith(`${KEY}: the env did not answer the format check (reset with seed 0, then the system prompt): remote /connect failed after 1 attempt(s): ${served.url}/connect: `);
    expect(err.hint).toContain("server is up");
  }, 60_000);
});
