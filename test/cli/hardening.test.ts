/** The compiled binary under conditions a first run rarely meets; and scripts/setup.sh's checks. */
import { afterAll, describe, expect, test } from "bun:test";
import { chmodSync, existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { parse } from "yaml";
import { BINARY, haveBinary, vagen } from "./binary.ts";

const ROOT = resolve(import.meta.dir, "../..");
const dir = mkdtempSync(join(tmpdir(), "vagen-hardening-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

function bash(script: string, env: Record<string, string> = {}): { code: number; stdout: string; stderr: string } {
  const p = Bun.spawnSync(["bash", "-c", script], { cwd: dir, env: { ...process.env, ...env }, stdout: "pipe", stderr: "pipe" });
  return { code: p.exitCode ?? -1, stdout: p.stdout.toString(), stderr: p.stderr.toString() };
}

describe.skipIf(!haveBinary)("dist/vagen", () => {
  test("output into a closed pipe ends quietly with status 0, no EPIPE trace", () => {
    // `true` exits at once, before vagen has started, so every write meets a closed pipe.
    const r = bash(`"${BINARY}" env list 2>stderr.txt | true; echo "\${PIPESTATUS[0]}"`);
    expect(readFileSync(join(dir, "stderr.txt"), "utf8")).toBe("");
    expect(r.stdout.trim()).toBe("0");
  });

  test("--debug stack traces name src/ files and lines, not the bundle", () => {
    const r = vagen(["--debug", "config", "show", "missing.yaml"], { cwd: dir });
    expect(r.code).toBe(1);
    expect(r.stderr).toMatch(/at readYaml \(src\/config\/load\.ts:\d+:\d+\)/);
    expect(r.stderr).toMatch(/\(src\/cli\/commands\/config\.ts:\d+:\d+\)/);
  });

  test("an eval config given by absolute path runs the same from any directory", () => {
    const config = join(ROOT, "examples/eval/quickstart.yaml");
    const shown = vagen(["config", "show", config], { cwd: dir });
    expect(shown.code).toBe(0);
    const checked = parse(shown.stdout);
    expect(checked.model.model_dir).toBe(join(ROOT, "test/fixtures/qwen2_5_vl_tiny"));
    expect(checked.output_dir).toBe(join(ROOT, "runs/eval/quickstart"));
    const out = join(dir, "quickstart-out");
    const overrides = [`output_dir=${out}`, "~envs.sokoban_vision", "envs.frozenlake_text.episodes=1", "envs.frozenlake_text.max_turns=1", "model.sampling.max_tokens=2"];
    const r = vagen(["eval", config, ...overrides, "--no-progress"], { cwd: dir, env: { OMP_NUM_THREADS: "2" } });
    expect(r.stderr).toContain("[1/1] frozenlake_text seed 0");
    expect(r.code).toBe(0);
    expect(existsSync(join(out, "frozenlake_text", "seed_0", "metrics.json"))).toBe(true);
  });
});

describe("scripts/setup.sh", () => {
  const setup = readFileSync(join(ROOT, "scripts/setup.sh"), "utf8");

  /** A fake `ldconfig -p`: the library comes first, then far more than a pipe holds. */
  function fakeLdconfig(withOpenblas: boolean): string {
    const bin = join(dir, withOpenblas ? "bin-with" : "bin-without");
    Bun.spawnSync(["mkdir", "-p", bin]);
    const first = withOpenblas ? 'echo "	libopenblas.so.0 (libc6,x86-64) => /usr/lib/x86_64-linux-gnu/libopenblas.so.0"' : "true";
    writeFileSync(join(bin, "ldconfig"), `#!/usr/bin/env bash\n${first}\nyes "	libother.so (libc6,x86-64) => /usr/lib/libother.so" | head -n 20000\n`);
    chmodSync(join(bin, "ldconfig"), 0o755);
    return bin;
  }

  function functionSource(name: string): string {
    const match = setup.match(new RegExp(`^${name}\\(\\) \\{[\\s\\S]*?^\\}`, "m"));
    expect(match, `${name} in setup.sh`).not.toBeNull();
    return match![0];
  }

  test("have_openblas finds the library every time under pipefail, even when the list is long", () => {
    const script = `set -euo pipefail\n${functionSource("have_openblas")}\nfor i in $(seq 1 10); do have_openblas || { echo "miss on try $i"; exit 1; }; done; echo found`;
    const found = bash(script, { PATH: `${fakeLdconfig(true)}:${process.env.PATH}` });
    expect(found.stdout.trim()).toBe("found");
    const missing = bash(`set -euo pipefail\n${functionSource("have_openblas")}\nif have_openblas; then echo found; else echo missing; fi`, {
      PATH: `${fakeLdconfig(false)}:${process.env.PATH}`,
    });
    expect(missing.stdout.trim()).toBe("missing");
  });

  test("no script pipes into an early-exiting reader (grep -q, head) under pipefail", () => {
    for (const name of readdirSync(join(ROOT, "scripts")).filter((f) => f.endsWith(".sh"))) {
      const text = readFileSync(join(ROOT, "scripts", name), "utf8");
      if (!/pipefail/.test(text)) continue;
      const code = text.split("\n").filter((line) => !line.trimStart().startsWith("#"));
      expect(code.filter((line) => /\|\s*(grep\s+(-\w*q|--quiet)|head)\b/.test(line)), name).toEqual([]);
    }
  });
});
