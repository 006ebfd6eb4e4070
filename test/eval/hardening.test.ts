/**
 * `vagen eval` hardening: no secret in any output or message, a failing run exits
 * non-zero, and config show checks what eval checks. The CLI runs as a subprocess from a
 * directory that is not the repository.
 */
import { afterEach, describe, expect, test } from "bun:test";
import { readdirSync, readFileSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { parse, stringify } from "yaml";
import { createEnv } from "../../envs/registry.ts";
import { EnvServer } from "../../envs/remote/server.ts";
import { solverAnswer } from "./answerers.ts";
import { type FakeServer, startFakeOpenAIServer } from "./fake-openai-server.ts";
import { FROZENLAKE_TEXT, fastModel, tempDir } from "./helpers.ts";

const MAIN = resolve(import.meta.dir, "../../src/cli/main.ts");
const ENV_TOKEN = "gym-token-3f9a7c";
const API_KEY = "sk-test-key-81b2e4d0";

let cleanups: (() => unknown)[] = [];
afterEach(async () => {
  for (const c of cleanups.reverse()) await c();
  cleanups = [];
});

function startModel(): FakeServer {
  const server = startFakeOpenAIServer({ answer: solverAnswer });
  cleanups.push(() => server.stop());
  return server;
}

function startEnvServer(token: string): string {
  const server = new EnvServer({ createEnv: (config) => createEnv("FrozenLake", config), token, port: 0 });
  const url = server.start();
  cleanups.push(() => server.stop());
  return url;
}

function workDir(): string {
  const dir = tempDir("vagen-eval-hardening-");
  cleanups.push(dir.cleanup);
  return dir.path;
}

async function runEval(args: string[], env: Record<string, string> = {}): Promise<{ code: number; stdout: string; stderr: string }> {
  const proc = Bun.spawn(["bun", MAIN, ...args], { cwd: tmpdir(), stdout: "pipe", stderr: "pipe", env: { ...process.env, NO_COLOR: "1", ...env } });
  const [code, stdout, stderr] = await Promise.all([proc.exited, new Response(proc.stdout).text(), new Response(proc.stderr).text()]);
  return { code, stdout, stderr };
}

/** Every file under `dir`, with its text. */
function allFiles(dir: string): { path: string; text: string }[] {
  return readdirSync(dir, { recursive: true, encoding: "utf8" })
    .map((name) => join(dir, name))
    .filter((path) => statSync(path).isFile())
    .map((path) => ({ path, text: readFileSync(path, "latin1") }));
}

function remoteEnvSpec(url: string, token: string) {
  return { name: "RemoteEnv", config: { base_urls: [url], token, retries: 0, ...FROZENLAKE_TEXT }, episodes: 2, max_turns: 3 };
}

describe("secrets never reach eval's outputs", () => {
  test("a RemoteEnv token and an API key from the environment appear in no file and no message", async () => {
    const model = startModel();
    const envUrl = startEnvServer(ENV_TOKEN);
    const dir = workDir();
    const out = join(dir, "out");
    const config = join(dir, "eval.yaml");
    writeFileSync(
      config,
      stringify({ output_dir: out, model: fastModel(model.baseUrl, { api_key_env: "HARDENING_API_KEY" }), envs: { remote: remoteEnvSpec(envUrl, ENV_TOKEN) } }),
    );
    const r = await runEval(["eval", config], { HARDENING_API_KEY: API_KEY });
    expect(r.stderr).not.toContain("ended in an error");
    expect(r.code).toBe(0);
    // The key did go to the server (so it was in the process), and the env server accepted the token.
    expect(model.requests[0]!.authorization).toBe(`Bearer ${API_KEY}`);
    const metrics = JSON.parse(readFileSync(join(out, "remote", "seed_0", "metrics.json"), "utf8"));
    expect(metrics.finish_reason).not.toBe("error");
    expect(metrics.env_config.token).toBe("[redacted]");
    expect(metrics.env_config.base_urls).toEqual([envUrl]);
    const copy = parse(readFileSync(join(out, "config.yaml"), "utf8"));
    expect(copy.envs.remote.config.token).toBe("[redacted]");
    expect(copy.model.api_key_env).toBe("HARDENING_API_KEY");
    const files = allFiles(out);
    expect(files.map((f) => f.path.slice(out.length))).toEqual(expect.arrayContaining(["/summary.json", "/config.yaml", "/remote/seed_1/transcript.md"]));
    for (const f of files) {
      expect(f.text, f.path).not.toContain(ENV_TOKEN);
      expect(f.text, f.path).not.toContain(API_KEY);
    }
    expect(r.stdout + r.stderr).not.toContain(ENV_TOKEN);
  });

  test("config show and error messages redact tokens, including ones given as overrides and inside URLs", async () => {
    const dir = workDir();
    const config = join(dir, "eval.yaml");
    const envs = { remote: { ...remoteEnvSpec("http://127.0.0.1:9", ENV_TOKEN), seed: [1, 5], seed_start: 3 } };
    writeFileSync(config, stringify({ output_dir: "out", model: fastModel(`http://admin:${ENV_TOKEN}@127.0.0.1:9/v1`), envs }));
    const shown = await runEval(["config", "show", config, "~envs.remote.seed", "envs.remote.config.token=override-token-77"]);
    expect(shown.code).toBe(0);
    expect(shown.stdout).toContain('token: "[redacted]"');
    expect(shown.stdout).toContain("http://[redacted]@127.0.0.1:9/v1");
    expect(shown.stdout + shown.stderr).not.toContain("override-token-77");
    expect(shown.stdout).not.toContain(ENV_TOKEN);
    // An error that quotes the override: the message keeps its shape, the value goes.
    const bad = await runEval(["config", "show", config, "~envs.remote.seed", "envs.remote.config.token=override-token-77", "envs.remote.config.retries=-1"]);
    expect(bad.code).toBe(1);
    expect(bad.stderr).toContain("retries");
    expect(bad.stderr + bad.stdout).not.toContain("override-token-77");
    expect(bad.stderr).not.toContain(ENV_TOKEN);
  });
});

describe("a run with failed episodes exits non-zero", () => {
  test("endpoint down: every episode errors, exit 1, and the count is said", async () => {
    const dir = workDir();
    const config = join(dir, "eval.yaml");
    writeFileSync(
      config,
      stringify({
        output_dir: join(dir, "out"),
        // Port 9 (discard) has no HTTP server: every request fails at once.
        model: fastModel("http://127.0.0.1:9/v1", { max_retries: 0 }),
        envs: { frozenlake: { name: "FrozenLake", config: FROZENLAKE_TEXT, episodes: 3, max_turns: 2 } },
      }),
    );
    const r = await runEval(["eval", config]);
    expect(r.stdout).toMatch(/frozenlake\s+3\s+0\.000/);
    expect(r.stderr).toContain("error: 3 of 3 episodes ended in an error");
    expect(r.code).toBe(1);
  });

  test("env server rejects the token (401): exit 1, the rejected token in no message", async () => {
    const model = startModel();
    const envUrl = startEnvServer("the-right-token-1234");
    const dir = workDir();
    const config = join(dir, "eval.yaml");
    writeFileSync(config, stringify({ output_dir: join(dir, "out"), model: fastModel(model.baseUrl), envs: { remote: remoteEnvSpec(envUrl, ENV_TOKEN) } }));
    const r = await runEval(["eval", config, "--no-progress"]);
    expect(r.stderr).toContain("2 of 2 episodes ended in an error");
    expect(r.code).toBe(1);
    expect(r.stderr).not.toContain(ENV_TOKEN);
    for (const f of allFiles(join(dir, "out"))) expect(f.text, f.path).not.toContain(ENV_TOKEN);
  });
});

describe("config show validates exactly what eval validates", () => {
  const cases: [string, Record<string, unknown>, string][] = [
    ["a typo in an env's config", { name: "Sokoban", config: { dim_rom: [6, 6] }, episodes: 1 }, "dim_rom"],
    ["seed together with seed_start", { name: "FrozenLake", episodes: 2, seed: [0, 10], seed_start: 3 }, "a seed directive and seed_start both choose the seeds"],
    ["an unknown harness", { name: "FrozenLake", episodes: 1, harness: "concatt" }, 'unknown harness "concatt"'],
  ];
  for (const [what, spec, message] of cases) {
    test(what, async () => {
      const dir = workDir();
      const config = join(dir, "eval.yaml");
      writeFileSync(config, stringify({ output_dir: "out", model: fastModel("http://127.0.0.1:9/v1"), envs: { bad: spec } }));
      const shown = await runEval(["config", "show", config]);
      const evaluated = await runEval(["eval", config]);
      expect(shown.code).toBe(1);
      expect(evaluated.code).toBe(1);
      expect(shown.stderr).toContain(message);
      // One validation: the same first line from both commands.
      expect(shown.stderr.split("\n")[0]).toBe(evaluated.stderr.split("\n")[0]!);
    });
  }
});
