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

for (const [signal, status] of [["SIGINT", 130], ["SIGTERM", 143]] as const) {
  test(`${signal}: stops after the step in progress, keeps it as final/, exits ${status}`, async () => {
    const out = join(root, signal);
    // Enough epochs that the run is still going when the signal comes.
    const child = spawn([process.execPath, join(ROOT, "src/cli/main.ts"), "sft", CONFIG, `output_dir=${out}`, "train.epochs=500"], {
      env: { ...process.env, OMP_NUM_THREADS: "1" },
      stdout: "pipe",
      stderr: "pipe",
    });
    let stderr = "";
    const decoder = new TextDecoder();
    const reader = child.stderr.getReader();
    // The signal once the third step is reported: the loop is running.
    while (!/sft step 3\//.test(stderr)) {
      const { value, done } = await reader.read();
      if (done) break;
      stderr += decoder.decode(value);
    }
    child.kill(signal);
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      stderr += decoder.decode(value);
    }
    expect(await child.exited).toBe(status);
    const stopped = Number(/sft interrupted after step (\d+)/.exec(stderr)?.[1]);
    expect(stopped).toBeGreaterThanOrEqual(3);
    expect(stderr).toContain(`error: sft: interrupted by ${signal} after step ${stopped}`);
    expect(readdirSync(join(out, "checkpoints"))).toEqual([`step_${stopped}`]);
    expect(readdirSync(out).filter((name) => name.startsWith("."))).toEqual([]);
    expect(existsSync(join(out, "final", "model.safetensors"))).toBe(true);
    loadModelFamily(join(out, "final"), { device: "cpu", dtype: "f32" }).dispose();
  }, 60_000);
}

test("SIGTERM in vagen demo's warm start: stops it after the step in progress, no RL phase, exit 143", async () => {
  const runDir = join(root, "demo");
  const child = spawn([process.execPath, join(ROOT, "src/cli/main.ts"), "demo", "--no-tui", "--out", runDir], {
    env: { ...process.env, OMP_NUM_THREADS: "1" },
    stdout: "pipe",
    stderr: "pipe",
  });
  let stderr = "";
  const decoder = new TextDecoder();
  const reader = child.stderr.getReader();
  while (!/sft step 10\//.test(stderr)) {
    const { value, done } = await reader.read();
    if (done) break;
    stderr += decoder.decode(value);
  }
  child.kill("SIGTERM");
  for (;;) {
    const { value, done } = await reader.read();
    if (done) break;
    stderr += decoder.decode(value);
  }
  expect(await child.exited).toBe(143);
  expect(stderr).toMatch(/error: demo: interrupted during the warm start, after supervised step \d+/);
  expect(stderr).not.toContain("rl: GiGPO");
  expect(existsSync(join(runDir, "sft", "final", "model.safetensors"))).toBe(true);
  expect(existsSync(join(runDir, "metrics.jsonl"))).toBe(false);
}, 60_000);
