/**
 * Finding libtorch and reading what a shim must match (version, C++ ABI, CUDA flavour)
 * from the files of pip torch, an official archive and Debian's packages, without
 * importing torch.
 */
import { afterEach, describe, expect, test } from "bun:test";
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { shimKey } from "../../src/shim/key.ts";
import { describeLibtorch, findLibtorch, fromDirectory, parseVersionPy } from "../../src/shim/libtorch.ts";

const dirs: string[] = [];
afterEach(() => {
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});

/** A libtorch tree with the given files (path -> contents). */
function tree(files: Record<string, string>): string {
  const root = mkdtempSync(join(tmpdir(), "vagen-libtorch-"));
  dirs.push(root);
  for (const [path, text] of Object.entries(files)) {
    mkdirSync(join(root, path, ".."), { recursive: true });
    writeFileSync(join(root, path), text);
  }
  return root;
}

const CMAKE = (abi: 0 | 1) => `if(CMAKE_SYSTEM_NAME STREQUAL "Linux")\n  set(TORCH_CXX_FLAGS "-D_GLIBCXX_USE_CXX11_ABI=${abi}")\nendif()\n`;

describe("reading a libtorch", () => {
  test("pip torch: version and CUDA from version.py, the ABI from its cmake config", () => {
    const root = tree({
      "version.py": "from typing import Optional\n\n__all__ = ['__version__']\n__version__ = '2.11.0+cu130'\ndebug = False\ncuda: Optional[str] = '13.0'\ngit_version = 'abc'\n",
      "lib/libtorch_cpu.so": "",
      "lib/libtorch_cuda.so": "",
      "include/ATen/ATen.h": "",
      "share/cmake/Torch/TorchConfig.cmake": CMAKE(1),
    });
    const lt = fromDirectory(root, "python3")!;
    expect(lt).toMatchObject({ origin: "python3", version: "2.11.0+cu130", cxx11Abi: true, cuda: "13.0", libDir: join(root, "lib") });
    expect(lt.includeDirs).toContain(join(root, "include"));
    expect(shimKey(lt)).toBe("torch2.11.0+cu130-cxx11-cuda13.0");
  });

  test("pip torch for the CPU: cuda = None", () => {
    expect(parseVersionPy("__version__ = '2.11.0+cpu'\ncuda: Optional[str] = None\n")).toEqual({ version: "2.11.0+cpu", cuda: null });
  });

  test("an official archive: build-version names the build, the cmake config the old ABI", () => {
    const root = tree({ "build-version": "2.5.1+cu124\n", "lib/libtorch_cpu.so": "", "lib/libtorch_cuda.so": "", "share/cmake/Torch/TorchConfig.cmake": CMAKE(0) });
    const lt = fromDirectory(root, "LIBTORCH")!;
    expect(lt).toMatchObject({ version: "2.5.1+cu124", cxx11Abi: false, cuda: "12.4", includeDirs: [] });
    expect(shimKey(lt)).toBe("torch2.5.1+cu124-precxx11-cuda12.4");
  });

  test("a runtime-only install: the version from the library's file name, the ABI from libc10's symbols", () => {
    const cxx11 = tree({ "lib/libtorch_cpu.so": "", "lib/libtorch_cpu.so.1.13.0": "", "lib/libc10.so": "\0_ZN3c106detail14torchCheckFailEPKcS2_jRKNSt7__cxx1112basic_stringIcSt11char_traitsIcESaIcEEE\0" });
    expect(describeLibtorch("debian", cxx11, join(cxx11, "lib"), [join(cxx11, "include")])).toMatchObject({ version: "1.13.0", cxx11Abi: true, cuda: null, includeDirs: [] });
    const old = tree({ "lib/libtorch_cpu.so": "", "lib/libc10.so": "\0_ZN3c106detail14torchCheckFailEPKcS2_jRKSs\0" });
    expect(describeLibtorch("debian", old, join(old, "lib"), [])).toMatchObject({ version: "unknown", cxx11Abi: false });
  });

  test("the headers' version.h gives the version of a tree without version.py", () => {
    const root = tree({
      "lib/libtorch_cpu.so": "",
      "include/ATen/ATen.h": "",
      "include/torch/csrc/api/include/torch/version.h": "#define TORCH_VERSION_MAJOR 1\n#define TORCH_VERSION_MINOR 13\n#define TORCH_VERSION_PATCH 1\n",
    });
    expect(fromDirectory(root, "LIBTORCH")!.version).toBe("1.13.1");
  });

  test("a folder without lib/libtorch_cpu.so is not a libtorch", () => {
    expect(fromDirectory(tree({ "include/ATen/ATen.h": "" }), "LIBTORCH")).toBeUndefined();
  });
});

describe("finding libtorch", () => {
  const saved = process.env.LIBTORCH;
  afterEach(() => {
    if (saved === undefined) delete process.env.LIBTORCH;
    else process.env.LIBTORCH = saved;
  });

  test("$LIBTORCH comes first", () => {
    const root = tree({ "build-version": "2.4.0+cpu\n", "lib/libtorch_cpu.so": "" });
    process.env.LIBTORCH = root;
    expect(findLibtorch()).toMatchObject({ origin: "LIBTORCH", root, version: "2.4.0+cpu", cuda: null });
  });

  test("a $LIBTORCH that is not a libtorch is named, with the file that was expected", () => {
    const root = tree({ "README": "" });
    process.env.LIBTORCH = root;
    expect(() => findLibtorch()).toThrow(`LIBTORCH=${root} is not a libtorch directory (expected ${join(root, "lib", "libtorch_cpu.so")})`);
  });

  test("shim keys tell apart every libtorch build a shim cannot be shared between", () => {
    const keys = new Set(
      [
        { version: "1.13.0", cxx11Abi: true, cuda: null },
        { version: "1.13.0", cxx11Abi: false, cuda: null },
        { version: "2.11.0+cu130", cxx11Abi: true, cuda: "13.0" },
        { version: "2.11.0+cu128", cxx11Abi: true, cuda: "12.8" },
        { version: "2.11.0+cpu", cxx11Abi: true, cuda: null },
      ].map(shimKey),
    );
    expect(keys.size).toBe(5);
  });
});
