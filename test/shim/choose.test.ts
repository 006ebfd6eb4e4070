/**
 * Which shim a vagen uses: the prebuilt one it carries for this libtorch build and ABI
 * version, else one compiled earlier into the cache, else one compiled now (written
 * whole into its cache folder); and a process loading a cached shim that does not load
 * compiles it again. A stand-in compiler (linking = copying the real shim) keeps the
 * compile instant; the libraries loaded are real.
 */
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, test } from "bun:test";
import { copyFileSync, existsSync, linkSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, realpathSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { chooseShim } from "../../src/shim/choose.ts";
import { embedded } from "../../src/shim/embedded.ts";
import { findLibtorch, libtorchLibraries, type Libtorch } from "../../src/shim/libtorch.ts";
import { ABI_VERSION } from "../../src/torch/native-symbols.ts";
import { torchInfo } from "../../src/torch/index.ts";
import { fakeCompiler } from "./fake-toolchain.ts";

const ROOT = join(import.meta.dir, "..", "..");
const ENV_KEYS = ["LIBTORCH", "VAGEN_CACHE_DIR", "CXX", "VAGEN_FAKE_SHIM", "VAGEN_FAKE_CALLS", "VAGEN_TORCH_SHIM"] as const;

let real: Libtorch;
let realShim: string;
let work: string;
let saved: Record<string, string | undefined>;

beforeAll(() => {
  real = findLibtorch();
  realShim = torchInfo().shim; // the shim this test process runs on: what the stand-in compiler "links"
}, 60_000);

/**
 * A libtorch that is this machine's, under another name: its lib/ and include/ are
 * links to the real ones, its version.py calls it 1.13.0+vagentest (say), so no
 * prebuilt shim matches it and loading a shim "for" it really works.
 */
function renamedLibtorch(dir: string): string {
  const root = join(dir, "libtorch");
  mkdirSync(root, { recursive: true });
  symlinkSync(real.libDir, join(root, "lib"));
  symlinkSync(real.includeDirs[0]!, join(root, "include"));
  const base = real.version.split("+")[0];
  writeFileSync(join(root, "version.py"), `__version__ = '${base}+vagentest'\ncuda = ${real.cuda ? `'${real.cuda}'` : "None"}\n`);
  return root;
}

beforeEach(() => {
  saved = Object.fromEntries(ENV_KEYS.map((k) => [k, process.env[k]]));
  work = mkdtempSync(join(tmpdir(), "vagen-choose-"));
  process.env.LIBTORCH = renamedLibtorch(work);
  process.env.VAGEN_CACHE_DIR = join(work, "cache");
  process.env.CXX = fakeCompiler();
  process.env.VAGEN_FAKE_SHIM = realShim;
  delete process.env.VAGEN_TORCH_SHIM;
});
afterEach(() => {
  for (const k of ENV_KEYS) {
    if (saved[k] === undefined) delete process.env[k];
    else process.env[k] = saved[k];
  }
  rmSync(work, { recursive: true, force: true });
});
afterAll(() => {
  for (const k of ENV_KEYS) if (saved?.[k] !== undefined) process.env[k] = saved[k];
});

const shims = () => join(work, "cache", "shims");

describe("choosing a shim", () => {
  test("with none carried for this libtorch, it is compiled once into the cache, then reused", () => {
    const first = chooseShim({ abiVersion: ABI_VERSION });
    expect(first.source).toBe("built");
    expect(first.key).toMatch(/^torch[\d.]+\+vagentest-cxx11-/);
    expect(first.reason).toContain("compiled now for torch");
    // Only the finished folder is left: shim, meta.json and nothing half-done.
    const folders = readdirSync(shims());
    expect(folders).toHaveLength(1);
    expect(folders[0]!.startsWith(`${first.key}-`)).toBe(true);
    expect(readdirSync(join(shims(), folders[0]!)).sort()).toEqual(["libvagen_torch.so", "libvagen_torch.so.hash", "meta.json"]);
    const meta = JSON.parse(readFileSync(join(shims(), folders[0]!, "meta.json"), "utf8"));
    expect(meta).toMatchObject({ key: first.key, abiVersion: ABI_VERSION, libtorch: { origin: "LIBTORCH", version: expect.stringContaining("+vagentest") } });

    const second = chooseShim({ abiVersion: ABI_VERSION });
    expect(second).toMatchObject({ source: "cached", path: first.path });
    expect(chooseShim({ abiVersion: ABI_VERSION, rebuild: true }).source).toBe("built");
  });

  test("a cached shim of another ABI version is never used", () => {
    const first = chooseShim({ abiVersion: ABI_VERSION });
    const metaFile = join(first.path, "..", "meta.json");
    writeFileSync(metaFile, readFileSync(metaFile, "utf8").replace(`"abiVersion": ${ABI_VERSION}`, `"abiVersion": ${ABI_VERSION - 1}`));
    expect(chooseShim({ abiVersion: ABI_VERSION }).source).toBe("built");
  });

  test("without a compiler, a shim compiled earlier still serves; without either, the message says what to install", () => {
    const built = chooseShim({ abiVersion: ABI_VERSION });
    process.env.CXX = join(work, "no-g++");
    expect(chooseShim({ abiVersion: ABI_VERSION })).toMatchObject({ source: "cached", path: built.path });
    rmSync(shims(), { recursive: true });
    let error: Error & { hint?: string } = new Error("none");
    try {
      chooseShim({ abiVersion: ABI_VERSION });
    } catch (err) {
      error = err as Error & { hint?: string };
    }
    expect(error.message).toContain("vagen must compile one once, and cannot: compiling the libtorch shim needs a C++ compiler");
    expect(error.hint).toContain("apt-get install g++");
  });

  test("the prebuilt shim is used for its own libtorch build and ABI version only", () => {
    delete process.env.LIBTORCH;
    const carried = embedded().prebuilt.filter((p) => p.abiVersion === ABI_VERSION);
    if (carried.length === 0) return; // a checkout built by nothing but `bun test` carries none
    const choice = chooseShim({ abiVersion: ABI_VERSION });
    expect(choice.source).toBe("prebuilt");
    expect(choice.reason).toContain(`carried by this vagen for torch ${real.version}`);
    // The same libtorch with bindings of another ABI version: compiled, never the prebuilt one.
    expect(chooseShim({ abiVersion: ABI_VERSION + 1 }).source).toBe("built");
  });
});

describe("loading", () => {
  // A process loads its shim once, so each load runs in a child: its shim's source and
  // reason, and the libtorch files mapped into it.
  function load(): { source: string; reason: string; stderr: string; mapped: string[] } {
    const script = `import("${join(ROOT, "src/torch/index.ts")}").then((t) => {
      const i = t.torchInfo();
      const mapped = [...new Set(require("fs").readFileSync("/proc/self/maps", "utf8").split("\\n").filter((l) => /libtorch_cpu|libc10/.test(l)).map((l) => l.slice(l.indexOf("/"))))];
      console.log(JSON.stringify({ source: i.shimSource, reason: i.shimReason, mapped }));
    })`;
    const child = Bun.spawnSync([process.execPath, "-e", script], { env: { ...process.env }, stdout: "pipe", stderr: "pipe" });
    const stderr = child.stderr.toString();
    if (!child.success) throw new Error(`child failed: ${stderr}`);
    return { ...JSON.parse(child.stdout.toString().trim().split("\n").pop()!), stderr };
  }

  test("the first run compiles the shim (saying so), the second loads it from the cache", () => {
    const first = load();
    expect(first.source).toBe("built");
    expect(first.stderr).toContain("[vagen] no prebuilt shim for torch");
    expect(first.stderr).toContain("[vagen] shim ready");
    const second = load();
    expect(second.source).toBe("cached");
    expect(second.stderr).toBe("");
  }, 60_000);

  test("a cached shim that does not load is compiled again", () => {
    load();
    const [folder] = readdirSync(shims());
    writeFileSync(join(shims(), folder!, "libvagen_torch.so"), "not a library");
    const again = load();
    expect(again.source).toBe("built");
    expect(again.reason).toContain("rebuilt for torch");
    expect(again.stderr).toContain("does not load");
    expect(existsSync(join(shims(), folder!, "libvagen_torch.so"))).toBe(true);
  }, 60_000);

  test("a prebuilt shim loads from a libtorch moved elsewhere, whatever rpath it was linked with", () => {
    if (real.cuda) return; // pip torch's CUDA libraries find their own dependencies relative to their folder
    const carried = embedded().prebuilt.some((p) => p.key.endsWith("-cpu") && p.abiVersion === ABI_VERSION);
    if (!carried) return;
    // The libraries under another path (hard links where the file system allows, else
    // copies), no headers, so the key comes from the file names and libc10's symbols.
    const moved = join(work, "moved");
    mkdirSync(join(moved, "lib"), { recursive: true });
    for (const lib of libtorchLibraries(real)) {
      const target = join(moved, "lib", lib.split("/").pop()!);
      try {
        linkSync(realpathSync(lib), target);
      } catch {
        copyFileSync(realpathSync(lib), target);
      }
    }
    const versioned = readdirSync(real.libDir).find((f) => /^libtorch_cpu\.so\.\d+\.\d+\.\d+$/.test(f));
    if (versioned) symlinkSync("libtorch_cpu.so", join(moved, "lib", versioned));
    process.env.LIBTORCH = moved;
    const result = load();
    expect(result.source).toBe("prebuilt");
    expect(result.mapped.sort()).toEqual([join(moved, "lib", "libc10.so"), join(moved, "lib", "libtorch_cpu.so")]);
  }, 60_000);
});
