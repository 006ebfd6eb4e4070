/**
 * `vagen monitor` from the command line (run from source, so no build is needed) on runs
 * that are broken or disappear: a clear error naming the file and line, output free of
 * the files' control bytes, and a live view that notices its directory is gone. The live
 * case runs under a pseudo-terminal (util-linux `script`) and is skipped without it.
 */
import { afterEach, describe, expect, test } from "bun:test";
import { cpSync, existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { decodePng } from "../../src/core/png.ts";

const ROOT = join(import.meta.dir, "..", "..");
const MAIN = join(ROOT, "src", "cli", "main.ts");
const FIXTURE = join(ROOT, "test", "fixtures", "run-dir");
const haveScript = Bun.spawnSync(["script", "--version"], { stdout: "ignore", stderr: "ignore" }).exitCode === 0;
/** Control characters other than newline. */
const CONTROL = /[\x00-\x09\x0b-\x1f\x7f-\x9f]/;

const temporaries: string[] = [];
afterEach(() => {
  for (const dir of temporaries.splice(0)) rmSync(dir, { recursive: true, force: true });
});

function temporary(): string {
  const dir = mkdtempSync(join(tmpdir(), "vagen-monitor-cli-"));
  temporaries.push(dir);
  return dir;
}

function monitorOnce(dir: string): { code: number; stdout: string; stderr: string } {
  const p = Bun.spawnSync(["bun", MAIN, "monitor", dir, "--once"], { cwd: tmpdir(), stdin: "ignore", stdout: "pipe", stderr: "pipe" });
  return { code: p.exitCode ?? -1, stdout: p.stdout.toString(), stderr: p.stderr.toString() };
}

describe("vagen monitor --once", () => {
  test("metrics.jsonl with lines but none readable: an error naming the file and the first bad line, no control bytes", () => {
    const dir = temporary();
    writeFileSync(join(dir, "metrics.jsonl"), "null\n\x1b[2J\x1b]0;pwned\x07\n");
    const r = monitorOnce(dir);
    expect(r.code).toBe(1);
    expect(r.stderr).toContain(`error: ${join(dir, "metrics.jsonl")}: no line is a metrics record (2 lines skipped; line 1: expected a JSON object with a numeric "step", got null)`);
    expect(r.stderr).toContain("hint: ");
    expect(r.stderr).not.toContain("internal");
    expect(r.stdout + r.stderr).not.toMatch(CONTROL);
  }, 30_000);

  test("a run with junk among good lines: the summary, the skipped lines named, escaped", () => {
    const dir = temporary();
    writeFileSync(join(dir, "metrics.jsonl"), '{"step": 1, "critic/score/mean": 0.5, "actor/entropy": null}\nnull\n\x1b[31mred\x07\n');
    const r = monitorOnce(dir);
    expect(r.code).toBe(0);
    expect(r.stdout).toContain(`train run ${dir}: step 1`);
    expect(r.stdout).toContain(`${join(dir, "metrics.jsonl")} line 2: skipped`);
    expect(r.stdout).toContain(`${join(dir, "metrics.jsonl")} line 3: skipped, not JSON: \\x1b[31mred\\x07`);
    expect(r.stdout).not.toMatch(CONTROL);
  }, 30_000);
});

describe("vagen monitor --png", () => {
  const monitorPng = (dir: string, out: string) => {
    const p = Bun.spawnSync(["bun", MAIN, "monitor", dir, "--png", out], { cwd: tmpdir(), stdin: "ignore", stdout: "pipe", stderr: "pipe" });
    return { code: p.exitCode ?? -1, stdout: p.stdout.toString(), stderr: p.stderr.toString() };
  };

  test("a training run: the learning curves as a PNG, and what was drawn", () => {
    const out = join(temporary(), "curves.png");
    const r = monitorPng(join(FIXTURE, "train"), out);
    expect(r.stderr).toBe("");
    expect(r.code).toBe(0);
    expect(r.stdout).toBe(`${out}: 6 step(s), 6 panel(s) (reward, success rate, validation mean reward, KL, entropy, response length)\n`);
    const image = decodePng(new Uint8Array(readFileSync(out)));
    expect(image.width).toBeGreaterThan(1000);
  }, 30_000);

  test("an eval run or metrics with no readable line: an error, no file", () => {
    const out = join(temporary(), "curves.png");
    const evalRun = monitorPng(join(FIXTURE, "eval"), out);
    expect(evalRun.code).toBe(1);
    expect(evalRun.stderr).toContain("no metrics.jsonl to plot (this is an eval run)");
    const broken = temporary();
    writeFileSync(join(broken, "metrics.jsonl"), "null\njunk\n");
    const r = monitorPng(broken, out);
    expect(r.code).toBe(1);
    expect(r.stderr).toContain("no line is a metrics record");
    expect(existsSync(out)).toBe(false);
  }, 30_000);
});

describe.skipIf(!haveScript)("live vagen monitor", () => {
  test("a watched run directory that is deleted: the dashboard says it is gone, and so does the terminal after q", async () => {
    const dir = temporary();
    cpSync(join(FIXTURE, "train"), dir, { recursive: true });
    const command = `stty cols 160 rows 30; exec bun '${MAIN}' monitor '${dir}' --interval 0.2 --image none`;
    const proc = Bun.spawn(["script", "-qfec", command, "/dev/null"], {
      cwd: tmpdir(),
      env: { ...process.env, TERM: "xterm-256color" },
      stdin: "pipe",
      stdout: "pipe",
      stderr: "pipe",
    });
    // A missed step kills the monitor, so the assertions fail rather than the runner's timeout.
    const killer = setTimeout(() => proc.kill(), 40_000);
    let output = "";
    let removed = false;
    let quit = false;
    const decoder = new TextDecoder();
    for await (const chunk of proc.stdout) {
      output += decoder.decode(chunk, { stream: true });
      if (!removed && output.includes("step 6/10")) {
        removed = true;
        rmSync(dir, { recursive: true, force: true });
      }
      if (removed && !quit && output.includes("is gone")) {
        quit = true;
        proc.stdin.write("q");
        proc.stdin.flush();
      }
    }
    const code = await proc.exited;
    clearTimeout(killer);
    expect(removed).toBe(true);
    expect(output).toContain(`the run directory ${dir} is gone (deleted or moved)`);
    expect(code).toBe(0);
    expect(output).toContain(`vagen monitor: the run directory ${dir} is gone (deleted or moved)\r\n`);
  }, 60_000);
});
