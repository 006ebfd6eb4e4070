/**
 * Runs the compiled `dist/vagen` as a subprocess, from a directory other than the
 * repository (the binary must work from anywhere). The suite is skipped when the binary
 * has not been built, except under scripts/test.sh, which builds it first and sets
 * VAGEN_REQUIRE_BINARY=1 so a missing binary fails loudly.
 */
import { existsSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

export const BINARY = join(import.meta.dir, "..", "..", "dist", "vagen");
export const haveBinary = existsSync(BINARY) || process.env.VAGEN_REQUIRE_BINARY === "1";

export interface RunResult {
  code: number;
  stdout: string;
  stderr: string;
}

export function vagen(args: string[], opts: { cwd?: string; env?: Record<string, string>; stdin?: string } = {}): RunResult {
  const p = Bun.spawnSync([BINARY, ...args], {
    cwd: opts.cwd ?? tmpdir(),
    env: { ...process.env, ...opts.env },
    stdin: opts.stdin === undefined ? "ignore" : new TextEncoder().encode(opts.stdin),
    stdout: "pipe",
    stderr: "pipe",
  });
  return { code: p.exitCode ?? -1, stdout: p.stdout.toString(), stderr: p.stderr.toString() };
}
