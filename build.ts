#!/usr/bin/env bun
/**
 * Builds vagen: the libtorch shim (ffi/*.cpp -> build/libvagen_torch.so) and the single
 * binary (dist/vagen, with the shim embedded). Only what changed is rebuilt.
 *
 *   bun build.ts               shim + binary
 *   bun build.ts --shim-only   just the shim (what `bun test` needs)
 *   bun build.ts --force       rebuild everything
 *
 * libtorch is looked for in this order:
 *   1. $LIBTORCH                      a libtorch directory (include/ and lib/)
 *   2. the torch package of python3   pip torch, with CUDA when it has it; the CUDA
 *                                     headers come from $CUDA_HOME or /usr/local/cuda
 *   3. /usr                           Debian's libtorch-dev
 *
 * With a CUDA libtorch and nvcc (from $CUDA_HOME, /usr/local/cuda or PATH), ffi/*.cu adds
 * vagen's fused kernels (static CUDA runtime, so nothing else needs to be found at load
 * time); VAGEN_CUDA_KERNELS=0 leaves them out and VAGEN_CUDA_ARCHS picks the GPU
 * architectures (default "80;90").
 */
import { createHash } from "node:crypto";
import { existsSync, mkdirSync, readdirSync, readFileSync, renameSync, rmSync, statSync, writeFileSync } from "node:fs";
import { cpus } from "node:os";
import { join, relative } from "node:path";
import { ShimAbiError, syncShimBindings } from "./scripts/shim-bindings.ts";

const ROOT = import.meta.dir;
const BUILD = join(ROOT, "build");
const OBJ = join(BUILD, "obj");
const SHIM = join(BUILD, "libvagen_torch.so");
const BINARY = join(ROOT, "dist", "vagen");

export interface Libtorch {
  /** How it was found: "LIBTORCH", "python3" or "debian". */
  origin: string;
  root: string;
  includeDirs: string[];
  libDir: string;
  version: string;
  cxx11Abi: boolean;
  cuda: boolean;
  cudaInclude?: string;
  /** nvcc of the CUDA toolkit, when the fused kernels are built. */
  nvcc?: string;
}

function log(msg: string): void {
  process.stderr.write(`[build] ${msg}\n`);
}

function fail(msg: string, hint?: string): never {
  process.stderr.write(`[build] error: ${msg}\n${hint ? `[build] hint: ${hint}\n` : ""}`);
  process.exit(1);
}

function run(cmd: string[], opts: { quiet?: boolean } = {}): { ok: boolean; out: string; err: string } {
  const p = Bun.spawnSync(cmd, { stdout: "pipe", stderr: "pipe" });
  const out = p.stdout.toString();
  const err = p.stderr.toString();
  if (!opts.quiet && !p.success) process.stderr.write(err);
  return { ok: p.success, out, err };
}

/** TORCH_VERSION from the headers (torch/version.h sits in different places per layout). */
function headerVersion(includeDirs: string[]): string | undefined {
  for (const dir of includeDirs) {
    const f = join(dir, "torch", "version.h");
    if (!existsSync(f)) continue;
    const text = readFileSync(f, "utf8");
    const part = (name: string) => text.match(new RegExp(`#define TORCH_VERSION_${name}\\s+(\\d+)`))?.[1];
    const [major, minor, patch] = [part("MAJOR"), part("MINOR"), part("PATCH")];
    if (major && minor) return `${major}.${minor}.${patch ?? 0}`;
  }
  return undefined;
}

function fromDirectory(root: string, origin: string): Libtorch | undefined {
  const includeDirs = [join(root, "include"), join(root, "include", "torch", "csrc", "api", "include")];
  const libDir = join(root, "lib");
  if (!existsSync(join(includeDirs[0]!, "ATen", "ATen.h")) || !existsSync(join(libDir, "libtorch_cpu.so"))) return undefined;
  const cuda = existsSync(join(libDir, "libtorch_cuda.so"));
  const cudaInclude = cuda ? findCudaInclude() : undefined;
  // libtorch archives ship either ABI; the cmake config records which one.
  const cmake = join(root, "share", "cmake", "Torch", "TorchConfig.cmake");
  const cxx11Abi = existsSync(cmake) ? !readFileSync(cmake, "utf8").includes("_GLIBCXX_USE_CXX11_ABI=0") : true;
  const nvcc = cudaInclude ? findNvcc(cudaInclude) : undefined;
  return { origin, root, includeDirs, libDir, version: headerVersion(includeDirs) ?? "unknown", cxx11Abi, cuda, cudaInclude, nvcc };
}

/** nvcc next to the CUDA headers, else on PATH; undefined when the kernels are not wanted. */
function findNvcc(cudaInclude: string): string | undefined {
  if (process.env.VAGEN_CUDA_KERNELS === "0") return undefined;
  const beside = join(cudaInclude, "..", "bin", "nvcc");
  if (existsSync(beside)) return beside;
  return Bun.which("nvcc") ?? undefined;
}

function findCudaInclude(): string | undefined {
  for (const base of [process.env.CUDA_HOME, process.env.CUDA_PATH, "/usr/local/cuda"]) {
    if (base && existsSync(join(base, "include", "cuda_runtime_api.h"))) return join(base, "include");
  }
  return undefined;
}

function fromPython(): Libtorch | undefined {
  const probe = run(
    [
      "python3",
      "-c",
      "import json, os, torch; print(json.dumps({'root': os.path.dirname(torch.__file__), 'version': torch.__version__, 'abi': bool(torch._C._GLIBCXX_USE_CXX11_ABI), 'cuda': torch.version.cuda}))",
    ],
    { quiet: true },
  );
  if (!probe.ok) return undefined;
  const info = JSON.parse(probe.out.trim().split("\n").pop()!) as { root: string; version: string; abi: boolean; cuda: string | null };
  const found = fromDirectory(info.root, "python3");
  if (!found) return undefined;
  found.version = info.version;
  found.cxx11Abi = info.abi;
  found.cuda = info.cuda !== null && found.cuda;
  if (!found.cuda) found.nvcc = undefined;
  if (found.cuda && !found.cudaInclude) {
    fail(
      `python3's torch ${info.version} has CUDA ${info.cuda}, but the CUDA headers were not found`,
      "set CUDA_HOME to the CUDA toolkit (the directory with include/cuda_runtime_api.h)",
    );
  }
  return found;
}

function fromDebian(): Libtorch | undefined {
  const libDir = "/usr/lib/x86_64-linux-gnu";
  const includeDirs = ["/usr/include", "/usr/include/torch/csrc/api/include"];
  if (!existsSync("/usr/include/ATen/ATen.h") || !existsSync(join(libDir, "libtorch_cpu.so"))) return undefined;
  return { origin: "debian", root: "/usr", includeDirs, libDir, version: headerVersion(includeDirs) ?? "unknown", cxx11Abi: true, cuda: false };
}

export function findLibtorch(): Libtorch {
  const env = process.env.LIBTORCH;
  if (env) {
    const found = fromDirectory(env, "LIBTORCH");
    if (!found) fail(`LIBTORCH=${env} is not a libtorch directory (expected include/ATen/ATen.h and lib/libtorch_cpu.so)`);
    return found;
  }
  const found = fromPython() ?? fromDebian();
  if (!found) {
    fail(
      "libtorch not found (looked at $LIBTORCH, python3's torch package and /usr)",
      "install it: apt-get install libtorch-dev libopenblas0-pthread   (or set LIBTORCH=/path/to/libtorch)",
    );
  }
  return found;
}

function sha(...parts: (string | Uint8Array)[]): string {
  const h = createHash("sha256");
  for (const p of parts) h.update(p);
  return h.digest("hex").slice(0, 16);
}

function compileFlags(lt: Libtorch): string[] {
  const flags = [
    "-std=c++17",
    "-O2",
    "-fPIC",
    "-DNDEBUG",
    `-D_GLIBCXX_USE_CXX11_ABI=${lt.cxx11Abi ? 1 : 0}`,
    `-DVAGEN_LIBTORCH_ORIGIN="${lt.origin}"`,
    `-DVAGEN_LIBTORCH_ROOT="${lt.root}"`,
    "-Wno-deprecated-declarations",
    "-Wno-unused-parameter",
    ...lt.includeDirs.map((d) => `-I${d}`),
    `-I${join(ROOT, "ffi")}`,
  ];
  if (lt.cuda) flags.push("-DVAGEN_WITH_CUDA=1", `-I${lt.cudaInclude}`);
  if (lt.nvcc) flags.push("-DVAGEN_WITH_CUDA_KERNELS=1");
  return flags;
}

/** nvcc flags for ffi/*.cu: standalone CUDA (no libtorch headers), position independent. */
function cudaFlags(): string[] {
  const archs = (process.env.VAGEN_CUDA_ARCHS ?? "80;90").split(/[;,]/).filter(Boolean);
  const last = archs[archs.length - 1]!;
  return [
    "-std=c++17",
    "-O3",
    "-Xcompiler=-fPIC",
    "-DNDEBUG",
    ...archs.map((a) => `-gencode=arch=compute_${a},code=sm_${a}`),
    // PTX of the newest architecture, so later GPUs compile the kernels at load time.
    `-gencode=arch=compute_${last},code=compute_${last}`,
    `-I${join(ROOT, "ffi")}`,
  ];
}

function linkFlags(lt: Libtorch): string[] {
  const libs = ["-ltorch_cpu", "-lc10"];
  // --no-as-needed: nothing in the shim may reference libtorch_cuda directly, but it
  // must still be loaded so the CUDA kernels register with the dispatcher.
  if (lt.cuda) libs.push("-Wl,--no-as-needed", "-ltorch_cuda", "-lc10_cuda", "-ltorch", "-Wl,--as-needed");
  // The static CUDA runtime's symbols stay private to the shim (--exclude-libs), so they
  // never interpose on libtorch's own libcudart.
  const kernels = lt.nvcc
    ? [`-L${join(lt.cudaInclude!, "..", "lib64")}`, "-Wl,--exclude-libs,libcudart_static.a", "-lcudart_static", "-ldl", "-lrt", "-lpthread"]
    : [];
  return [`-L${lt.libDir}`, `-Wl,-rpath,${lt.libDir}`, ...libs, ...kernels];
}

function objectName(src: string): string {
  return relative(join(ROOT, "ffi"), src).replace(/[\\/]/g, "_").replace(/\.(cpp|cu)$/, (ext) => (ext === ".cu" ? "_cu" : ""));
}

/** compiler: the C++ compiler (with its flags) or nvcc (with its flags), ending before -c. */
async function compileObject(src: string, compiler: string[], headerHash: string): Promise<{ obj: string; rebuilt: boolean }> {
  const obj = join(OBJ, `${objectName(src)}.o`);
  const stamp = `${obj}.hash`;
  const hash = sha(readFileSync(src), headerHash, compiler.join(" "));
  if (existsSync(obj) && existsSync(stamp) && readFileSync(stamp, "utf8") === hash) return { obj, rebuilt: false };
  const started = performance.now();
  const proc = Bun.spawn([...compiler, "-c", src, "-o", `${obj}.tmp`], { stdout: "inherit", stderr: "pipe" });
  const err = await new Response(proc.stderr).text();
  if ((await proc.exited) !== 0) {
    process.stderr.write(err);
    fail(`compiling ${relative(ROOT, src)} failed`);
  }
  renameSync(`${obj}.tmp`, obj);
  writeFileSync(stamp, hash);
  log(`compiled ${relative(ROOT, src)} (${((performance.now() - started) / 1000).toFixed(1)} s)`);
  return { obj, rebuilt: true };
}

/** Run `tasks` with at most `limit` in flight. */
async function pool<T>(tasks: (() => Promise<T>)[], limit: number): Promise<T[]> {
  const results: T[] = new Array(tasks.length);
  let next = 0;
  const worker = async () => {
    while (next < tasks.length) {
      const i = next++;
      results[i] = await tasks[i]!();
    }
  };
  await Promise.all(Array.from({ length: Math.min(limit, tasks.length) }, worker));
  return results;
}

/**
 * Regenerates src/torch's symbol table and op codes from ffi/ when they are stale, and
 * stops the build on an unguarded entry point or an ABI change without a version bump.
 */
function syncBindings(): void {
  try {
    const { abi, stale } = syncShimBindings();
    if (stale.length > 0) log(`regenerated ${stale.join(", ")} from ffi/ (ABI version ${abi.version})`);
  } catch (err) {
    if (err instanceof ShimAbiError) fail(err.message);
    throw err;
  }
}

export async function buildShim(force = false): Promise<Libtorch> {
  syncBindings();
  const lt = findLibtorch();
  log(`libtorch ${lt.version} from ${lt.origin} (${lt.root})${lt.cuda ? " with CUDA" : ", CPU only"}`);
  mkdirSync(OBJ, { recursive: true });
  const ffiDir = join(ROOT, "ffi");
  const files = readdirSync(ffiDir).sort();
  const cppSources = files.filter((f) => f.endsWith(".cpp")).map((f) => join(ffiDir, f));
  if (cppSources.length === 0) fail("ffi/ has no .cpp files");
  const cuSources = lt.nvcc ? files.filter((f) => f.endsWith(".cu")).map((f) => join(ffiDir, f)) : [];
  if (lt.cuda) log(lt.nvcc ? `fused CUDA kernels with ${lt.nvcc}` : "no nvcc found (or VAGEN_CUDA_KERNELS=0): building without the fused CUDA kernels");
  const headerHash = sha(...files.filter((f) => /\.(h|hpp|inc)$/.test(f)).map((f) => readFileSync(join(ffiDir, f))));
  const cxx = [process.env.CXX ?? "g++", ...compileFlags(lt)];
  const nvcc = lt.nvcc ? [lt.nvcc, ...cudaFlags()] : [];
  const sources = [...cuSources, ...cppSources];
  if (force) for (const s of sources) writeFileSync(join(OBJ, `${objectName(s)}.o.hash`), "");
  const jobs = Math.max(1, Number(process.env.VAGEN_BUILD_JOBS) || cpus().length);
  const objects = await pool(sources.map((s) => () => compileObject(s, s.endsWith(".cu") ? nvcc : cxx, headerHash)), jobs);
  const linkStamp = `${SHIM}.hash`;
  const linkHash = sha(objects.map((o) => readFileSync(`${o.obj}.hash`, "utf8")).join(","), linkFlags(lt).join(" "));
  const anyRebuilt = objects.some((o) => o.rebuilt);
  if (!anyRebuilt && existsSync(SHIM) && existsSync(linkStamp) && readFileSync(linkStamp, "utf8") === linkHash) {
    log("shim up to date");
    return lt;
  }
  const link = run([cxx[0]!, "-shared", "-o", `${SHIM}.tmp`, ...objects.map((o) => o.obj), ...linkFlags(lt)]);
  if (!link.ok) fail("linking the shim failed");
  renameSync(`${SHIM}.tmp`, SHIM);
  writeFileSync(linkStamp, linkHash);
  log(`linked ${relative(ROOT, SHIM)} (${(statSync(SHIM).size / 1024).toFixed(0)} KiB)`);
  return lt;
}

/** Every file that goes into the binary, hashed, so an unchanged tree skips the compile. */
function binaryInputsHash(): string {
  const h = createHash("sha256");
  const walk = (dir: string) => {
    for (const entry of readdirSync(dir, { withFileTypes: true }).sort((a, b) => a.name.localeCompare(b.name))) {
      const p = join(dir, entry.name);
      if (entry.isDirectory()) walk(p);
      else {
        h.update(relative(ROOT, p));
        h.update(readFileSync(p));
      }
    }
  };
  for (const dir of ["src", "envs", "configs"]) if (existsSync(join(ROOT, dir))) walk(join(ROOT, dir));
  // build.ts itself: a change to the bundler options (minify, source maps) rebuilds too.
  for (const f of ["package.json", "bun.lock", "build/libvagen_torch.so", "build.ts"]) if (existsSync(join(ROOT, f))) h.update(readFileSync(join(ROOT, f)));
  return h.digest("hex").slice(0, 16);
}

export async function buildBinary(force = false): Promise<void> {
  const stamp = join(BUILD, "binary.hash");
  const hash = binaryInputsHash();
  if (!force && existsSync(BINARY) && existsSync(stamp) && readFileSync(stamp, "utf8") === hash) {
    log("dist/vagen up to date");
    return;
  }
  mkdirSync(join(ROOT, "dist"), { recursive: true });
  const started = performance.now();
  const result = await Bun.build({
    entrypoints: [join(ROOT, "src", "cli", "main.ts")],
    compile: { outfile: BINARY },
    minify: { syntax: true, whitespace: true },
    // The map goes into the binary, so `--debug` stack traces name src/ files and lines
    // instead of positions in the minified bundle.
    sourcemap: "linked",
  });
  if (!result.success) {
    for (const l of result.logs) process.stderr.write(`${l}\n`);
    fail("compiling dist/vagen failed");
  }
  // The copy written next to the binary is not needed at run time: dist/ stays one file.
  rmSync(`${BINARY}.map`, { force: true });
  writeFileSync(stamp, hash);
  log(`wrote dist/vagen (${(statSync(BINARY).size / 2 ** 20).toFixed(0)} MiB, ${((performance.now() - started) / 1000).toFixed(1)} s)`);
}

if (import.meta.main) {
  const args = new Set(process.argv.slice(2));
  const force = args.has("--force");
  await buildShim(force);
  if (!args.has("--shim-only")) await buildBinary(force);
}
