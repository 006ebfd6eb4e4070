/**
 * The compiled binary's side of the shim: `vagen doctor` says which shim it loaded and
 * why, and `vagen setup` prepares one ahead of time. On a libtorch the binary carries no
 * shim for (this machine's libtorch under another version name), `setup` compiles one
 * from the sources the binary carries (a stand-in compiler makes that instant) and
 * `doctor` then loads it from the cache.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { mkdirSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { findLibtorch } from "../../src/shim/libtorch.ts";
import { haveBinary, vagen } from "../cli/binary.ts";
import { fakeCompiler } from "./fake-toolchain.ts";

const SHIM = join(import.meta.dir, "..", "..", "build", "libvagen_torch.so");

describe.skipIf(!haveBinary)("dist/vagen: doctor and setup", () => {
  let work: string;
  let env: Record<string, string>;

  beforeAll(() => {
    work = mkdtempSync(join(tmpdir(), "vagen-binary-shim-"));
    const real = findLibtorch();
    const root = join(work, "libtorch");
    mkdirSync(root);
    symlinkSync(real.libDir, join(root, "lib"));
    symlinkSync(real.includeDirs[0]!, join(root, "include"));
    writeFileSync(join(root, "version.py"), `__version__ = '${real.version.split("+")[0]}+vagentest'\ncuda = ${real.cuda ? `'${real.cuda}'` : "None"}\n`);
    env = { LIBTORCH: root, VAGEN_CACHE_DIR: join(work, "cache"), CXX: fakeCompiler(), VAGEN_FAKE_SHIM: SHIM };
  });
  afterAll(() => rmSync(work, { recursive: true, force: true }));

  test("doctor reports the carried shim, its key and why", () => {
    const r = vagen(["doctor", "--json"]);
    expect(r.code).toBe(0);
    const { shim, libtorch } = JSON.parse(r.stdout);
    expect(shim).toMatchObject({ source: "prebuilt", embedded: true, key: expect.stringMatching(/^torch\d/) });
    expect(shim.reason).toContain(`carried by this vagen for torch ${libtorch.version}`);
    expect(libtorch.origin).not.toBeNull();
  }, 60_000);

  test("setup compiles a shim for a libtorch the binary carries none for; doctor then loads it from the cache", () => {
    const setup = vagen(["setup"], { env });
    expect(setup.code).toBe(0);
    expect(setup.stderr).toContain("[vagen] no prebuilt shim for torch");
    expect(setup.stderr).toMatch(/\[vagen\] compiled core\.cpp/);
    expect(setup.stdout).toMatch(/^shim\s+built: compiled now for torch [\d.]+\+vagentest/m);
    const doctor = vagen(["doctor", "--json"], { env });
    expect(doctor.code).toBe(0);
    expect(JSON.parse(doctor.stdout).shim).toMatchObject({ source: "cached", embedded: false });
    expect(doctor.stderr).toBe("");
  }, 60_000);

  test("setup says what to install when it must compile and cannot", () => {
    const r = vagen(["setup"], { env: { ...env, VAGEN_CACHE_DIR: join(work, "empty-cache"), CXX: join(work, "no-g++") } });
    expect(r.code).toBe(1);
    expect(r.stderr).toContain("vagen must compile one once, and cannot: compiling the libtorch shim needs a C++ compiler");
    expect(r.stderr).toContain("hint: apt-get install g++");
  }, 60_000);
});
