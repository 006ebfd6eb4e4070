/**
 * The compiled binary under a pseudo-terminal (util-linux `script`): the dashboard is what
 * a person at a terminal sees, keys reach it, and it gives the terminal back. Skipped
 * without the binary (see test/cli/binary.ts) or without `script`.
 */
import { afterAll, describe, expect, test } from "bun:test";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { BINARY, haveBinary, vagen } from "../cli/binary.ts";

const ROOT = join(import.meta.dir, "..", "..");
const FIXTURE = join(ROOT, "test", "fixtures", "run-dir");
const haveScript = Bun.spawnSync(["script", "--version"], { stdout: "ignore", stderr: "ignore" }).exitCode === 0;
const ENTER_ALTERNATE_SCREEN = "\x1b[?1049h";
const LEAVE_ALTERNATE_SCREEN = "\x1b[?1049l";

const temporaries: string[] = [];
afterAll(() => {
  for (const dir of temporaries) rmSync(dir, { recursive: true, force: true });
});

function temporary(prefix: string): string {
  const dir = mkdtempSync(join(tmpdir(), prefix));
  temporaries.push(dir);
  return dir;
}

/** The quick-start eval cut to one one-turn Sokoban episode, plus `extra`. */
function quickEval(out: string, extra: string[]): string[] {
  return ["eval", join(ROOT, "examples", "eval", "quickstart.yaml"), `output_dir=${out}`, "envs.sokoban_vision.episodes=1", "envs.sokoban_vision.max_turns=1", ...extra];
}

/**
 * Run `args` on an 80x24 pseudo-terminal. `keys` are typed one after another, each once
 * the output shows its `after` text (Ink rewrites only the changed part of a line, so
 * `after` must be text that changed). Returns everything the terminal received; a run
 * still going after `limitMs` is killed so a missed key fails the assertions, not the
 * test runner's timeout.
 */
async function onTerminal(args: string[], keys: { after: string; type: string }[] = [], limitMs = 20_000): Promise<{ code: number; output: string }> {
  const command = `stty cols 80 rows 24; exec ${[BINARY, ...args].map((a) => `'${a}'`).join(" ")}`;
  const proc = Bun.spawn(["script", "-qfec", command, "/dev/null"], {
    cwd: tmpdir(),
    env: { ...process.env, TERM: "xterm-256color", OMP_NUM_THREADS: "2" },
    stdin: "pipe",
    stdout: "pipe",
    stderr: "pipe",
  });
  const killer = setTimeout(() => proc.kill(), limitMs);
  let output = "";
  const pending = [...keys];
  const decoder = new TextDecoder();
  for await (const chunk of proc.stdout) {
    output += decoder.decode(chunk, { stream: true });
    while (pending.length > 0 && output.includes(pending[0]!.after)) {
      proc.stdin.write(pending.shift()!.type);
      proc.stdin.flush();
    }
  }
  const code = await proc.exited;
  clearTimeout(killer);
  return { code, output };
}

describe.skipIf(!haveBinary || !haveScript)("the dashboard in the compiled binary", () => {
  test("monitor --once prints the text summary, on a terminal or not", async () => {
    const piped = vagen(["monitor", join(FIXTURE, "train"), "--once"]);
    expect(piped.code).toBe(0);
    expect(piped.stdout).toContain("step 6/10");
    expect(piped.stdout).toMatch(/reward +0\.6000 +0\.1000 +0\.6000/);
    expect(piped.stdout).toContain("checkpoints: step 3, step 6");
    const { code, output } = await onTerminal(["monitor", join(FIXTURE, "eval"), "--once"]);
    expect(code).toBe(0);
    expect(output).toMatch(/sokoban_vision +2\/2 +0\.0%/);
    expect(output).not.toContain(ENTER_ALTERNATE_SCREEN);
  }, 30_000);

  test("monitor on a terminal: the live dashboard, keys to the episode viewer, q to leave", async () => {
    const { code, output } = await onTerminal(
      ["monitor", join(FIXTURE, "train"), "--image", "blocks"],
      [
        { after: "1 overview", type: "2" },
        // The newest episode first, then one back, then its first turn.
        { after: "001_frozenlake_text_seed1_traj0", type: "\x1b[D" },
        { after: "000_sokoban_vision_seed0_traj0", type: "\x1b[B" },
        { after: "answer: Down", type: "q" },
      ],
    );
    expect(code).toBe(0);
    expect(output).toContain(ENTER_ALTERNATE_SCREEN);
    expect(output).toContain("vagen monitor train");
    expect(output).toContain("step 6/10");
    expect(output).toContain("episode 4/4");
    expect(output).toContain("turn 1/2");
    expect(output).toContain("answer: Down");
    expect(output).toContain("world-model 0.0300");
    // Half-block pixels of the observation image.
    expect(output).toContain("\x1b[48;2;");
    expect(output).toContain(LEAVE_ALTERNATE_SCREEN);
  }, 30_000);

  test("eval on a terminal: the dashboard during a short CPU run, then the summary table", async () => {
    const out = temporary("vagen-tui-eval-");
    const { code, output } = await onTerminal(quickEval(out, ["envs.frozenlake_text.episodes=1", "envs.frozenlake_text.max_turns=1"]));
    expect(code).toBe(0);
    expect(output).toContain(ENTER_ALTERNATE_SCREEN);
    expect(output).toContain("vagen eval");
    expect(output).toContain("sokoban_vision");
    // Ink rewrites only the changed end of a line, so look for the counts, not the whole row:
    // each env's 1 of 1 episodes done, none successful.
    expect(output).toMatch(/1\/1 +0\.0%/);
    // The table comes after the dashboard has given the screen back.
    const left = output.lastIndexOf(LEAVE_ALTERNATE_SCREEN);
    expect(left).toBeGreaterThan(0);
    expect(output.slice(left)).toMatch(/env +episodes +success +reward/);
    expect(output.slice(left)).toContain(`summary: ${join(out, "summary.json")}`);
  }, 120_000);

  test("train on a terminal: the dashboard during one CPU step, then its text summary", async () => {
    const out = temporary("vagen-tui-train-");
    const { code, output } = await onTerminal(
      [
        "train",
        join(ROOT, "examples", "train", "tiny-cpu.yaml"),
        "trainer.total_steps=1",
        "trainer.val_before_train=false",
        "trainer.test_freq=0",
        `trainer.output_dir=${out}`,
        "--image",
        "blocks",
      ],
      [],
      170_000,
    );
    expect(code).toBe(0);
    expect(output).toContain(ENTER_ALTERNATE_SCREEN);
    expect(output).toContain("vagen train");
    expect(output).toContain("rollout");
    const left = output.lastIndexOf(LEAVE_ALTERNATE_SCREEN);
    expect(left).toBeGreaterThan(0);
    const after = output.slice(left);
    expect(after).toContain(`train run ${out}: step 1/1`);
    expect(after).toMatch(/entropy +\d/);
    expect(after).toContain("checkpoints: step 1");
  }, 180_000);

  test("eval with --no-tui on a terminal keeps the progress bar", async () => {
    const out = temporary("vagen-tui-eval-");
    const { code, output } = await onTerminal(quickEval(out, ["~envs.frozenlake_text", "--no-tui"]));
    expect(code).toBe(0);
    expect(output).not.toContain(ENTER_ALTERNATE_SCREEN);
    expect(output).toContain("eval [");
  }, 120_000);
});
