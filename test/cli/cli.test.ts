/** The compiled binary, run as a subprocess from outside the repository. */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { parse } from "yaml";
import pkg from "../../package.json" with { type: "json" };
import { haveBinary, vagen } from "./binary.ts";

let dir: string;
beforeAll(() => {
  dir = mkdtempSync(join(tmpdir(), "vagen-cli-"));
  writeFileSync(join(dir, "base.yaml"), "trainer:\n  lr: 0.1\n  epochs: 2\n");
  writeFileSync(join(dir, "run.yaml"), "defaults: [base]\nname: run\n");
  writeFileSync(join(dir, "broken.yaml"), "a: [1,\n");
  writeFileSync(join(dir, "not-a-library.so"), "this is not an ELF file");
});
afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe.skipIf(!haveBinary)("dist/vagen", () => {
  test("--version prints the package version", () => {
    const r = vagen(["--version"]);
    expect(r.code).toBe(0);
    expect(r.stdout.trim()).toBe(pkg.version);
  });

  test("--help lists every command with a one-line purpose", () => {
    const r = vagen(["--help"]);
    expect(r.code).toBe(0);
    for (const cmd of ["eval", "env", "config", "doctor"]) {
      const line = r.stdout.split("\n").find((l) => l.trimStart().startsWith(`${cmd} `));
      expect(line, `help line for ${cmd}`).toBeDefined();
      expect(line!.replace(/^\s*\S+(\s+\[[^\]]*\]|\s+<[^>]*>|\s+\[options\])*\s+/, "").length).toBeGreaterThan(10);
    }
  });

  test("an unknown command is an error with a suggestion", () => {
    const r = vagen(["doctr"]);
    expect(r.code).not.toBe(0);
    expect(r.stderr).toContain("unknown command 'doctr'");
    expect(r.stderr).toContain("doctor");
  });

  test("config show prints the composed config with overrides applied", () => {
    const r = vagen(["config", "show", "run.yaml", "trainer.epochs=5", "--raw"], { cwd: dir });
    expect(r.code).toBe(0);
    expect(parse(r.stdout)).toEqual({ trainer: { lr: 0.1, epochs: 5 }, name: "run" });
  });

  test("errors are one clear line without a stack trace; --debug adds it", () => {
    const r = vagen(["config", "show", "broken.yaml", "--raw"], { cwd: dir });
    expect(r.code).toBe(1);
    expect(r.stderr).toStartWith("error: broken.yaml: invalid YAML");
    expect(r.stderr).not.toContain("    at ");
    const missing = vagen(["config", "show", "missing.yaml"], { cwd: dir });
    expect(missing.code).toBe(1);
    expect(missing.stderr.trim()).toBe("error: config file not found: missing.yaml");
    const debug = vagen(["--debug", "config", "show", "missing.yaml"], { cwd: dir });
    expect(debug.code).toBe(1);
    expect(debug.stderr).toContain("at ");
  });

  test("a bad override names itself", () => {
    const r = vagen(["config", "show", "run.yaml", "trainer.lr", "--raw"], { cwd: dir });
    expect(r.code).toBe(1);
    expect(r.stderr).toContain('bad override "trainer.lr": expected key.path=value');
  });

  test("doctor --json reports libtorch, the shim and a passing self-check", () => {
    const r = vagen(["doctor", "--json"]);
    expect(r.code).toBe(0);
    const report = JSON.parse(r.stdout);
    expect(report.ok).toBe(true);
    expect(report.vagen).toBe(pkg.version);
    expect(report.bun).toBe(Bun.version);
    expect(report.libtorch.version).toMatch(/^\d+\.\d+/);
    expect(report.libtorch.library).toContain("libtorch_cpu");
    expect(typeof report.shim.path).toBe("string");
    expect(report.shim.embedded).toBe(true); // the compiled binary carries its own shim
    expect(report.cuda.available).toBe(report.cuda.devices.length > 0);
    const cpu = report.checks.find((c: { name: string }) => c.name === "matmul + backward on cpu");
    expect(cpu.ok).toBe(true);
    expect(report.problem).toBeNull();
  });

  test("doctor prints a table for people", () => {
    const r = vagen(["doctor"]);
    expect(r.code).toBe(0);
    expect(r.stdout).toMatch(/^libtorch\s+\d+\.\d+/m);
    expect(r.stdout).toMatch(/^ok\s+matmul \+ backward on cpu/m);
  });

  test("doctor exits non-zero with a fix-it message when the shim can't be loaded", () => {
    const gone = vagen(["doctor", "--json"], { env: { VAGEN_TORCH_SHIM: join(dir, "nope.so") } });
    expect(gone.code).toBe(1);
    expect(JSON.parse(gone.stdout).problem.message).toContain("does not exist");
    expect(gone.stderr).toContain("hint:");
    const bad = vagen(["doctor"], { env: { VAGEN_TORCH_SHIM: join(dir, "not-a-library.so") } });
    expect(bad.code).toBe(1);
    expect(bad.stderr).toContain("cannot load the libtorch shim");
    expect(bad.stderr).toContain("hint: install libtorch");
  });
});
