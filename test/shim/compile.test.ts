/**
 * The shim build shared by build.ts, `vagen setup` and the first use of a binary: the
 * toolchain check says what to install, flags follow the libtorch, stale objects are
 * recompiled and fresh ones kept, failures carry the compiler's message, and the library
 * is written whole or not at all. A stand-in compiler keeps this fast.
 */
import { afterEach, beforeEach, describe, expect, test } from "bun:test";
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { buildShim, planShimBuild } from "../../src/shim/compile.ts";
import { ShimError } from "../../src/shim/errors.ts";
import type { Libtorch } from "../../src/shim/libtorch.ts";
import { fakeCompiler } from "./fake-toolchain.ts";

let work: string;
let saved: Record<string, string | undefined>;

function cpuLibtorch(over: Partial<Libtorch> = {}): Libtorch {
  mkdirSync(join(work, "lt", "include", "ATen"), { recursive: true });
  return { origin: "LIBTORCH", root: join(work, "lt"), libDir: join(work, "lt", "lib"), includeDirs: [join(work, "lt", "include")], version: "2.4.0+cpu", cxx11Abi: true, cuda: null, ...over };
}

function sources(files: Record<string, string> = { "shim.h": "#define VT_ABI_VERSION 1\n", "core.cpp": "int a;\n", "ops.cpp": "int b;\n", "nn.cpp": "int c;\n" }): string {
  const dir = join(work, "ffi");
  mkdirSync(dir, { recursive: true });
  for (const [name, text] of Object.entries(files)) writeFileSync(join(dir, name), text);
  return dir;
}

beforeEach(() => {
  work = mkdtempSync(join(tmpdir(), "vagen-compile-"));
  saved = { CXX: process.env.CXX, VAGEN_FAKE_CALLS: process.env.VAGEN_FAKE_CALLS, VAGEN_FAKE_SHIM: process.env.VAGEN_FAKE_SHIM };
  process.env.CXX = fakeCompiler();
  process.env.VAGEN_FAKE_CALLS = join(work, "calls.txt");
  delete process.env.VAGEN_FAKE_SHIM;
});
afterEach(() => {
  for (const [k, v] of Object.entries(saved)) {
    if (v === undefined) delete process.env[k];
    else process.env[k] = v;
  }
  rmSync(work, { recursive: true, force: true });
});

const compiledFiles = () => (existsSync(process.env.VAGEN_FAKE_CALLS!) ? readFileSync(process.env.VAGEN_FAKE_CALLS!, "utf8").split("\n").filter((l) => l.startsWith("0 ")).map((l) => l.split("/").pop()) : []);

describe("planning a shim build", () => {
  test("a missing compiler is named with what to install", () => {
    process.env.CXX = join(work, "no-such-g++");
    expect(() => planShimBuild(cpuLibtorch(), sources())).toThrow(`compiling the libtorch shim needs a C++ compiler, and ${join(work, "no-such-g++")} was not found`);
    try {
      planShimBuild(cpuLibtorch(), sources());
    } catch (err) {
      expect(err).toBeInstanceOf(ShimError);
      expect((err as ShimError).hint).toContain("apt-get install g++");
    }
  });

  test("a libtorch without headers is named, with the package that has them", () => {
    const lt = cpuLibtorch({ origin: "debian", includeDirs: [], version: "1.13.0" });
    try {
      planShimBuild(lt, sources());
      throw new Error("expected a ShimError");
    } catch (err) {
      expect((err as ShimError).message).toContain("needs libtorch's C++ headers");
      expect((err as ShimError).hint).toContain("apt-get install libtorch-dev");
    }
  });

  test("the ABI flag follows the libtorch, and the build hash tells apart ABI, sources and compiler", () => {
    const src = sources();
    const newAbi = planShimBuild(cpuLibtorch(), src);
    const oldAbi = planShimBuild(cpuLibtorch({ cxx11Abi: false }), src);
    expect(newAbi.cxxFlags).toContain("-D_GLIBCXX_USE_CXX11_ABI=1");
    expect(oldAbi.cxxFlags).toContain("-D_GLIBCXX_USE_CXX11_ABI=0");
    expect(newAbi.linkFlags).toEqual(expect.arrayContaining(["-ltorch_cpu", "-lc10"]));
    expect(newAbi.buildHash).not.toBe(oldAbi.buildHash);
    writeFileSync(join(src, "nn.cpp"), "int c2;\n");
    const edited = planShimBuild(cpuLibtorch(), src);
    expect(edited.sourcesHash).not.toBe(newAbi.sourcesHash);
    expect(edited.buildHash).not.toBe(newAbi.buildHash);
  });

  test("the build hash does not depend on the folder the sources sit in", () => {
    const a = planShimBuild(cpuLibtorch(), sources());
    const other = join(work, "elsewhere");
    mkdirSync(other);
    for (const f of readdirSync(join(work, "ffi"))) writeFileSync(join(other, f), readFileSync(join(work, "ffi", f)));
    expect(planShimBuild(cpuLibtorch(), other).buildHash).toBe(a.buildHash);
  });
});

describe("building a shim", () => {
  test("compiles every source, then only what changed; links only when something did", () => {
    const plan = planShimBuild(cpuLibtorch(), sources());
    const opts = { objDir: join(work, "obj"), output: join(work, "out", "libvagen_torch.so"), jobs: 2 };
    mkdirSync(join(work, "out"));
    const first = buildShim(plan, opts);
    expect(first.rebuilt).toBe(true);
    expect(compiledFiles().sort()).toEqual(["core.cpp", "nn.cpp", "ops.cpp"]);
    expect(readFileSync(opts.output, "utf8")).toBe("library\n");

    rmSync(process.env.VAGEN_FAKE_CALLS!);
    expect(buildShim(plan, opts)).toMatchObject({ rebuilt: false, compiled: [] });
    expect(compiledFiles()).toEqual([]);

    writeFileSync(join(work, "ffi", "ops.cpp"), "int b2;\n");
    const again = buildShim(planShimBuild(cpuLibtorch(), join(work, "ffi")), opts);
    expect(again).toMatchObject({ rebuilt: true, compiled: ["ops.cpp"] });
    expect(compiledFiles()).toEqual(["ops.cpp"]);
  });

  test("a header change recompiles everything; force does too", () => {
    const opts = { objDir: join(work, "obj"), output: join(work, "libvagen_torch.so") };
    buildShim(planShimBuild(cpuLibtorch(), sources()), opts);
    writeFileSync(join(work, "ffi", "shim.h"), "#define VT_ABI_VERSION 2\n");
    expect(buildShim(planShimBuild(cpuLibtorch(), join(work, "ffi")), opts).compiled.sort()).toEqual(["core.cpp", "nn.cpp", "ops.cpp"]);
    expect(buildShim(planShimBuild(cpuLibtorch(), join(work, "ffi")), { ...opts, force: true }).compiled).toHaveLength(3);
  });

  test("a compile error carries the compiler's message and the failing file, and writes no library", () => {
    const plan = planShimBuild(cpuLibtorch(), sources({ "shim.h": "", "good.cpp": "int a;\n", "bad.cpp": "#error boom\n" }));
    const output = join(work, "libvagen_torch.so");
    let error: ShimError | undefined;
    try {
      buildShim(plan, { objDir: join(work, "obj"), output, jobs: 4 });
    } catch (err) {
      error = err as ShimError;
    }
    expect(error).toBeInstanceOf(ShimError);
    expect(error!.message).toContain("compiling the libtorch shim failed in bad.cpp (torch 2.4.0+cpu)");
    expect(error!.message).toContain("error: #error boom");
    expect(error!.hint).toContain("bad.o.log");
    expect(existsSync(output)).toBe(false);
    expect(readdirSync(work).filter((f) => f.includes(".tmp"))).toEqual([]);
  });
});
