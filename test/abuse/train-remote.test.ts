/**
 * `vagen train` against `vagen env serve`: a remote env is a training env like any other
 * (the format preflight and the prompt budget ask it after a reset), and a server killed
 * mid-run ends the run with the remote error named, not a hang or a silent success.
 */
import { afterAll, describe, expect, test } from "bun:test";
import { existsSync, mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { loadTrainConfig } from "../../src/training/config.ts";
import { runTraining } from "../../src/training/trainer.ts";

const MAIN = join(import.meta.dir, "../../src/cli/main.ts");
const TINY = join(import.meta.dir, "../../examples/train/tiny-cpu.yaml");
const TOKEN = "remote-train-token";

const servers: ReturnType<typeof Bun.spawn>[] = [];
afterAll(async () => {
  for (const s of servers) {
    s.kill("SIGKILL");
    await s.exited;
  }
});

/** `vagen env serve FrozenLake` (from source) on a free port; resolves with its URL once its banner is out. */
async function serve(): Promise<{ proc: ReturnType<typeof Bun.spawn>; url: string }> {
  const proc = Bun.spawn(["bun", MAIN, "env", "serve", "FrozenLake", "--port", "0", "--token", TOKEN], { stdout: "pipe", stderr: "pipe" });
  servers.push(proc);
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

function remote(url: string, dir: string, steps: number): string[] {
  return [
    `trainer.output_dir=${dir}`,
    `trainer.total_steps=${steps}`,
    "trainer.test_freq=0",
    "trainer.save_freq=1",
    "data.train.frozenlake.name=RemoteEnv",
    `data.train.frozenlake.config.base_urls=${url}`,
    `data.train.frozenlake.config.token=${TOKEN}`,
    "data.train.frozenlake.config.retries=0",
    "data.train.frozenlake.config.log_retries=false",
  ];
}

describe("training against vagen env serve", () => {
  test(
    "trains on a remote env, and a server killed mid-run fails the run naming the remote error",
    async () => {
      const server = await serve();
      const dir = mkdtempSync(join(tmpdir(), "vagen-remote-train-"));
      const done = await runTraining(await loadTrainConfig(TINY, remote(server.url, dir, 1)));
      expect(done.reason).toBe("completed");
      expect(existsSync(join(dir, "checkpoints", "step_1", "state.json"))).toBe(true);

      // the second segment loses its server after its first step
      const run = runTraining(await loadTrainConfig(TINY, remote(server.url, dir, 4)), {
        onEvent: (e) => {
          if (e.type === "step_finished" && e.step === 2) server.proc.kill("SIGKILL");
        },
      });
      await expect(run).rejects.toThrow(/env_error: \d+ \(first: .*(connect|step|reset|fetch|ECONNREFUSED|Unable to connect)/i);
      expect(existsSync(join(dir, "checkpoints", "step_2", "state.json"))).toBe(true);
    },
    { timeout: 300_000 },
  );
});
