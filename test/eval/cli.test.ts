/** `vagen eval` end to end: the CLI as a subprocess against the fake server. */
import { afterEach, describe, expect, test } from "bun:test";
import { existsSync, readFileSync, writeFileSync } from "node:fs";
import { join, resolve } from "node:path";
import { stringify } from "yaml";
import { solverAnswer } from "./answerers.ts";
import { type FakeServer, type FakeServerOptions, startFakeOpenAIServer } from "./fake-openai-server.ts";
import { FROZENLAKE_TEXT, fastModel, SOKOBAN_TEXT, tempDir } from "./helpers.ts";

const ROOT = resolve(import.meta.dir, "../..");
const MAIN = join(ROOT, "src/cli/main.ts");

let server: FakeServer | undefined;
let dir: { path: string; cleanup: () => void } | undefined;
afterEach(async () => {
  await server?.stop();
  server = undefined;
  dir?.cleanup();
  dir = undefined;
});

function writeConfig(options: FakeServerOptions, envs: Record<string, unknown>, model: Record<string, unknown> = {}): { configPath: string; out: string } {
  server = startFakeOpenAIServer(options);
  dir = tempDir("vagen-eval-cli-");
  const configPath = join(dir.path, "eval.yaml");
  const out = join(dir.path, "out");
  // The base URL is given on the command line below, as a user would point a config at a server.
  writeFileSync(configPath, stringify({ output_dir: out, model: fastModel("http://127.0.0.1:9/v1", model), run: { max_concurrent_episodes: 2 }, envs }));
  return { configPath, out };
}

function spawnEval(args: string[]) {
  return Bun.spawn(["bun", MAIN, "eval", ...args], { cwd: ROOT, stdout: "pipe", stderr: "pipe", env: { ...process.env, NO_COLOR: "1" } });
}

describe("vagen eval (subprocess)", () => {
  test("runs a config with overrides, logs plainly off a TTY, prints the table, writes summary.json", async () => {
    const { configPath, out } = writeConfig(
      { answer: solverAnswer },
      {
        sokoban: { name: "Sokoban", config: SOKOBAN_TEXT, episodes: 2, seed_start: 10, max_turns: 5 },
        frozenlake: { name: "FrozenLake", config: FROZENLAKE_TEXT, episodes: 2, max_turns: 5, harness: { name: "compact", history_turns: 2 } },
      },
    );
    const proc = spawnEval([configPath, `model.base_url=${server!.baseUrl}`, "envs.sokoban.episodes=3"]);
    const [code, stdout, stderr] = await Promise.all([proc.exited, new Response(proc.stdout).text(), new Response(proc.stderr).text()]);
    expect(stderr).toContain("eval: 5 episode(s)");
    expect(stderr).toMatch(/\[\d\/5\] sokoban seed 1\d: success/);
    expect(code).toBe(0);
    expect(stdout).toMatch(/env\s+episodes\s+success\s+reward\s+turns\s+format_err\s+errors/);
    expect(stdout).toMatch(/sokoban\s+3\s+1\.000/);
    expect(stdout).toMatch(/frozenlake\s+2\s+1\.000/);
    const summary = JSON.parse(readFileSync(join(out, "summary.json"), "utf8"));
    expect(summary.envs.frozenlake.harness).toBe("compact");
    expect(summary.complete).toBe(true);
  });

  test("a bad config key is one clear error line and exit 1, before any request", async () => {
    const { configPath } = writeConfig({ answer: solverAnswer }, { sokoban: { name: "Sokoban", episodes: 1, max_turn: 2 } });
    const proc = spawnEval([configPath]);
    const [code, stderr] = await Promise.all([proc.exited, new Response(proc.stderr).text()]);
    expect(code).toBe(1);
    expect(stderr).toContain('unknown key "envs.sokoban.max_turn" (did you mean "max_turns"?)');
    expect(server!.requests.length).toBe(0);
  });

  test("Ctrl-C stops cleanly: exit 130, finished episodes kept, summary written", async () => {
    // The first answer comes at once; after that the server stalls, so the run is mid-flight when interrupted.
    const { configPath, out } = writeConfig(
      { answer: solverAnswer, fault: (n) => (n >= 1 ? { delayMs: 3000 } : undefined) },
      { frozenlake: { name: "FrozenLake", config: { ...FROZENLAKE_TEXT, max_actions_per_step: 20 }, episodes: 4, max_turns: 3 } },
      { timeout_s: 10 },
    );
    const proc = spawnEval([configPath, `model.base_url=${server!.baseUrl}`, "run.max_concurrent_episodes=1"]);
    const stderrText = new Response(proc.stderr).text();
    while (server!.requests.length < 2) await Bun.sleep(20);
    proc.kill("SIGINT");
    const [code, stderr] = await Promise.all([proc.exited, stderrText]);
    expect(stderr).toContain("interrupted");
    expect(code).toBe(130);
    const summary = JSON.parse(readFileSync(join(out, "summary.json"), "utf8"));
    expect(summary.complete).toBe(false);
    expect(summary.envs.frozenlake).toMatchObject({ episodes: 1, planned: 4, success_rate: 1 });
    expect(existsSync(join(out, "frozenlake", "seed_0", "metrics.json"))).toBe(true);
    expect(existsSync(join(out, "frozenlake", "seed_1"))).toBe(false);
  });
});
