/**
 * Ctrl-C (or SIGTERM) in `vagen sft`: the run stops after the step in progress, saves it
 * as its last checkpoint and final/ (a model directory that loads), says so, and exits
 * 130 (143); nothing half-written is left behind. `vagen demo` does the same in its warm
 * start, and runs no RL after it.
 */
import { afterAll, expect, test } from "bun:test";
import { existsSync, mkdtempSync, readdirSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { spawn } from "bun";
import { loadModelFamily } from "../../src/models/index.ts";

const ROOT = join(import.meta.dir, "..", "..");
const CONFIG = join(ROOT, "examples/sft/frozenlake-solver.yaml");
const root = mkdtempSync(join(tmpdir(), "vagen-sft-signal-"));
afterAll(() => rmSync(root, { recursive: true, force: true }));

/** Runs `vagen ARGS` from the sources, sends `signal` once stderr matches `when`; its exit status and stderr. */
async function signalledRun(args: string[], when: RegExp, signal: NodeJS.Signals): Promise<{ status: number; stderr: string }> {
  const child = spawn([process.execPath, join(ROOT, "src/cli/main.ts"), ...args], { env: { ...process.env, OMP_NUM_THREADS: "1" }, stdout: "pipe", stderr: "pipe" });
  const reader = child.stderr.getReader();
  const decoder = new TextDecoder();
  let stderr = "";
  let sent = false;
  for (;;) {
    const { value, done } = await reader.read();
    if (done) break;
    stderr += decoder.decode(value);
    if (!sent && when.test(stderr)) {
      child.kill(signal);
      sent = true;
    }
  }
  return { status: await child.exited, stderr };
}

for (const [signal, status] of [["SIGINT", 130], ["SIGTERM", 143]] as const) {
  test(`${signal}: stops after the step in progress, keeps it as final/, exits ${status}`, async () => {
    const out = join(root, signal);
    // Enough epochs that the run is still going when the signal comes: after the third step.
    const run = await signalledRun(["sft", CONFIG, `output_dir=${out}`, "train.epochs=500"], /sft step 3\//, signal);
    expect(run.status).toBe(status);
    const stopped = Number(/sft interrupted after step (\d+)/.exec(run.stderr)?.[1]);
    expect(stopped).toBeGreaterThanOrEqual(3);
    expect(run.stderr).toContain(`error: sft: interrupted by ${signal} after step ${stopped}`);
    expect(readdirSync(join(out, "checkpoints"))).toEqual([`step_${stopped}`]);
    expect(readdirSync(out).filter((name) => name.startsWith("."))).toEqual([]);
    expect(existsSync(join(out, "final", "model.safetensors"))).toBe(true);
    loadModelFamily(join(out, "final"), { device: "cpu", dtype: "f32" }).dispose();
  }, 60_000);
}

test("SIGTERM in vagen demo's warm start: stops it after the step in progress, no RL phase, exit 143", async () => {
  const runDir = join(root, "demo");
  const run = await signalledRun(["demo", "--no-tui", "--out", runDir], /sft step 10\//, "SIGTERM");
  expect(run.status).toBe(143);
  expect(run.stderr).toMatch(/error: demo: interrupted during the warm start, after supervised step \d+/);
  expect(run.stderr).not.toContain("rl: GiGPO");
  expect(existsSync(join(runDir, "sft", "final", "model.safetensors"))).toBe(true);
  expect(existsSync(join(runDir, "metrics.jsonl"))).toBe(false);
}, 60_000);
