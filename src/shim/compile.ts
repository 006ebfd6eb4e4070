/**
 * Compiling the libtorch shim: ffi/*.cpp (and, with a CUDA libtorch and nvcc, the fused
 * kernels of ffi/*.cu) into one libvagen_torch.so. The one implementation behind
 * `bun build.ts`, `vagen setup` and the first use of a binary on a libtorch it carries
 * no prebuilt shim for, the way PyTorch's JIT C++ extensions compile on first import.
 *
 * planShimBuild() resolves the toolchain and the flags (or says what to install);
 * buildShim() compiles what is stale (each object is stamped with a hash of its source,
 * the headers and the flags), in parallel, and links with an atomic rename, so a reader
 * never sees a half-written library.
 */
import { createHash } from "node:crypto";
import { existsSync, mkdirSync, readdirSync, readFileSync, renameSync, rmSync, statSync, writeFileSync } from "node:fs";
import { cpus } from "node:os";
import { join } from "node:path";
import { ShimError } from "./errors.ts";
import type { Libtorch } from "./libtorch.ts";

export interface Toolchain {
  /** The C++ compiler ($CXX, else g++). */
  cxx: string;
  /** CUDA headers, for a CUDA libtorch (ATen's CUDA headers include the toolkit's). */
  cudaInclude?: string;
  /** nvcc, when vagen's fused CUDA kernels are built. */
  nvcc?: string;
  /**
   * The folder with nccl.h, for a CUDA libtorch: with it, ffi/dist.cpp compiles c10d's
   * NCCL process group (ProcessGroupNCCL.hpp includes nccl.h, which pip torch leaves to
   * the nvidia-nccl wheel). Undefined: no NCCL backend (VAGEN_NCCL=0 also turns it off).
   */
  ncclInclude?: string;
}

export interface ShimBuildPlan {
  libtorch: Libtorch;
  toolchain: Toolchain;
  sourceDir: string;
  /** ffi/*.cu first (the slowest), then ffi/*.cpp. */
  sources: string[];
  cxxFlags: string[];
  nvccFlags: string[];
  linkFlags: string[];
  /** Hash of every ffi/ file: a shim built from other sources is another shim. */
  sourcesHash: string;
  /** Hash of the sources and every flag: names a compiled shim in the cache. */
  buildHash: string;
}

export function sha(...parts: (string | Uint8Array)[]): string {
  const h = createHash("sha256");
  for (const p of parts) h.update(p);
  return h.digest("hex").slice(0, 16);
}

/** Hash of shim sources by file name (names and contents, in name order). */
export function hashSourceFiles(files: Record<string, string | Uint8Array>): string {
  const names = Object.keys(files).filter(isShimSource).sort();
  return sha(...names.flatMap((n) => [n, files[n]!]));
}

/** hashSourceFiles() of a folder. */
export function hashSources(sourceDir: string): string {
  return hashSourceFiles(Object.fromEntries(readdirSync(sourceDir).filter(isShimSource).map((f) => [f, readFileSync(join(sourceDir, f))])));
}

export function isShimSource(name: string): boolean {
  return /\.(cpp|cu|h|hpp|inc)$/.test(name);
}

function findCudaInclude(): string | undefined {
  for (const base of [process.env.CUDA_HOME, process.env.CUDA_PATH, "/usr/local/cuda"]) {
    if (base && existsSync(join(base, "include", "cuda_runtime_api.h"))) return join(base, "include");
  }
  return undefined;
}

/** nvcc next to the CUDA headers, else on PATH; undefined when the kernels are not wanted. */
function findNvcc(cudaInclude: string): string | undefined {
  if (process.env.VAGEN_CUDA_KERNELS === "0") return undefined;
  const beside = join(cudaInclude, "..", "bin", "nvcc");
  if (existsSync(beside)) return beside;
  return Bun.which("nvcc") ?? undefined;
}

/** nccl.h for a CUDA libtorch: $NCCL_HOME, pip's nvidia-nccl wheel beside torch, the CUDA toolkit, /usr. */
function findNcclInclude(lt: Libtorch, cudaInclude: string): string | undefined {
  if (process.env.VAGEN_NCCL === "0") return undefined;
  const candidates = [
    process.env.NCCL_INCLUDE_DIR,
    process.env.NCCL_HOME && join(process.env.NCCL_HOME, "include"),
    process.env.NCCL_ROOT && join(process.env.NCCL_ROOT, "include"),
    // pip: site-packages/torch beside site-packages/nvidia/nccl (cu12) or nvidia/cu13.
    join(lt.root, "..", "nvidia", "nccl", "include"),
    join(lt.root, "..", "nvidia", "cu13", "include"),
    join(lt.root, "..", "nvidia", "cu12", "include"),
    ...lt.includeDirs,
    cudaInclude,
    "/usr/include",
    "/usr/local/include",
  ];
  return candidates.find((d): d is string => !!d && existsSync(join(d, "nccl.h")));
}

function headersHint(lt: Libtorch): string {
  if (lt.origin === "debian") return "apt-get install libtorch-dev (the headers of Debian's libtorch)";
  if (lt.origin === "python3") return "reinstall pip torch (its wheel ships include/), or set LIBTORCH to an official libtorch archive";
  return "use a libtorch with its include/ folder (the official archives have one)";
}

/** The compiler, headers and CUDA toolkit a shim build needs; a ShimError naming what to install when one is missing. */
export function findToolchain(lt: Libtorch): Toolchain {
  const cxx = process.env.CXX ?? "g++";
  if (!Bun.which(cxx)) {
    throw new ShimError(`compiling the libtorch shim needs a C++ compiler, and ${cxx} was not found`, "apt-get install g++ (or set CXX to a C++17 compiler)");
  }
  if (lt.includeDirs.length === 0) {
    throw new ShimError(`compiling the libtorch shim needs libtorch's C++ headers, and ${lt.root} (torch ${lt.version}) has none (no include/ATen/ATen.h)`, headersHint(lt));
  }
  if (!lt.cuda) return { cxx };
  const cudaInclude = findCudaInclude();
  if (!cudaInclude) {
    throw new ShimError(
      `libtorch ${lt.version} has CUDA ${lt.cuda}, and compiling the shim for it needs the CUDA toolkit's headers, which were not found`,
      "install the CUDA toolkit and set CUDA_HOME to it (the directory with include/cuda_runtime_api.h)",
    );
  }
  return { cxx, cudaInclude, nvcc: findNvcc(cudaInclude), ncclInclude: findNcclInclude(lt, cudaInclude) };
}

function cxxFlags(lt: Libtorch, tc: Toolchain, sourceDir: string): string[] {
  const flags = [
    "-std=c++17",
    "-O2",
    "-fPIC",
    "-DNDEBUG",
    `-D_GLIBCXX_USE_CXX11_ABI=${lt.cxx11Abi ? 1 : 0}`,
    "-Wno-deprecated-declarations",
    "-Wno-unused-parameter",
    ...lt.includeDirs.map((d) => `-I${d}`),
    `-I${sourceDir}`,
  ];
  if (tc.cudaInclude) flags.push("-DVAGEN_WITH_CUDA=1", `-I${tc.cudaInclude}`);
  if (tc.nvcc) flags.push("-DVAGEN_WITH_CUDA_KERNELS=1");
  // ffi/dist.cpp's process-group backends: VAGEN_GLOO=0 leaves Gloo out (a libtorch
  // whose Gloo headers do not compile), ncclInclude brings NCCL in.
  if (process.env.VAGEN_GLOO === "0") flags.push("-DVAGEN_NO_GLOO=1");
  // Gloo's own headers, which ProcessGroupGloo.hpp includes and no libtorch ships (Debian:
  // libgloo-dev in /usr/include): elsewhere, VAGEN_GLOO_INCLUDE names the folder holding gloo/.
  const glooInclude = process.env.VAGEN_GLOO_INCLUDE;
  if (glooInclude && existsSync(join(glooInclude, "gloo", "algorithm.h"))) flags.push(`-I${glooInclude}`);
  if (tc.cudaInclude && tc.ncclInclude) {
    flags.push("-DVAGEN_WITH_NCCL=1");
    if (!lt.includeDirs.includes(tc.ncclInclude) && tc.ncclInclude !== "/usr/include") flags.push(`-I${tc.ncclInclude}`);
  }
  return flags;
}

/** nvcc flags for ffi/*.cu: standalone CUDA (no libtorch headers), position independent. */
function nvccFlags(sourceDir: string): string[] {
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
    `-I${sourceDir}`,
  ];
}

function linkFlags(lt: Libtorch, tc: Toolchain): string[] {
  const libs = ["-ltorch_cpu", "-lc10"];
  // --no-as-needed: nothing in the shim may reference libtorch_cuda directly, but it
  // must still be loaded so the CUDA kernels register with the dispatcher.
  if (tc.cudaInclude) libs.push("-Wl,--no-as-needed", "-ltorch_cuda", "-lc10_cuda", "-ltorch", "-Wl,--as-needed");
  // The static CUDA runtime's symbols stay private to the shim (--exclude-libs), so they
  // never interpose on libtorch's own libcudart.
  const kernels = tc.nvcc
    ? [`-L${join(tc.cudaInclude!, "..", "lib64")}`, "-Wl,--exclude-libs,libcudart_static.a", "-lcudart_static", "-ldl", "-lrt", "-lpthread"]
    : [];
  // The rpath finds libtorch when the shim is opened alone (VAGEN_TORCH_SHIM); vagen's
  // loader opens libtorch itself first, so a shim also loads from another libtorch path.
  return [`-L${lt.libDir}`, `-Wl,-rpath,${lt.libDir}`, ...libs, ...kernels];
}

/** What building a shim for `lt` from the sources in `sourceDir` takes; throws a ShimError when something is missing. */
export function planShimBuild(lt: Libtorch, sourceDir: string): ShimBuildPlan {
  const toolchain = findToolchain(lt);
  const files = readdirSync(sourceDir).sort();
  const cpp = files.filter((f) => f.endsWith(".cpp")).map((f) => join(sourceDir, f));
  if (cpp.length === 0) throw new ShimError(`${sourceDir} has no .cpp files`, "the shim's sources (ffi/) are incomplete");
  const cu = toolchain.nvcc ? files.filter((f) => f.endsWith(".cu")).map((f) => join(sourceDir, f)) : [];
  const plan = {
    libtorch: lt,
    toolchain,
    sourceDir,
    sources: [...cu, ...cpp],
    cxxFlags: cxxFlags(lt, toolchain, sourceDir),
    nvccFlags: toolchain.nvcc ? nvccFlags(sourceDir) : [],
    linkFlags: linkFlags(lt, toolchain),
    sourcesHash: hashSources(sourceDir),
  };
  // The source folder itself is not part of the identity (-I<dir> varies per build folder).
  const portable = (flags: string[]) => flags.filter((f) => f !== `-I${sourceDir}`).join(" ");
  const buildHash = sha(plan.sourcesHash, toolchain.cxx, portable(plan.cxxFlags), portable(plan.nvccFlags), plan.linkFlags.join(" "));
  return { ...plan, buildHash };
}

export interface BuildOptions {
  /** Object files and their hash stamps. */
  objDir: string;
  /** The library to write (atomically). */
  output: string;
  /** Recompile every object. */
  force?: boolean;
  /** Compilers run at once (default: $VAGEN_BUILD_JOBS, else the core count). */
  jobs?: number;
  /** Prefix of the progress lines on stderr ("[build]"); none when undefined. */
  progressPrefix?: string;
}

export interface BuildResult {
  output: string;
  /** Whether anything was compiled or linked (false: it was up to date). */
  rebuilt: boolean;
  compiled: string[];
  seconds: number;
}

function objectName(src: string, sourceDir: string): string {
  return src.slice(sourceDir.length + 1).replace(/[\\/]/g, "_").replace(/\.(cpp|cu)$/, (ext) => (ext === ".cu" ? "_cu" : ""));
}

const quote = (s: string) => `'${s.replace(/'/g, `'\\''`)}'`;

interface Job {
  label: string;
  argv: string[];
  /** Where the job's output goes; shown when it fails. */
  logFile: string;
}

/**
 * Runs the jobs, at most `limit` at once, and returns those that failed. Synchronous on
 * purpose: the shim may be needed inside a synchronous call (the first tensor), so the
 * compilers run in parallel under one `sh` that this call waits for. Each finished job
 * prints its progress line to stderr as it ends.
 */
function runJobs(jobs: Job[], limit: number, progressPrefix: string | undefined): Job[] {
  if (jobs.length === 0) return [];
  const lines: string[] = [];
  for (let i = 0; i < jobs.length; i += limit) {
    for (const job of jobs.slice(i, i + limit)) {
      const say = progressPrefix ? `[ $s = 0 ] && echo ${quote(`${progressPrefix} compiled ${job.label}`)}" ($(( $(date +%s) - t )) s)" >&2` : "true";
      lines.push(`(t=$(date +%s); ${job.argv.map(quote).join(" ")} >${quote(job.logFile)} 2>&1; s=$?; echo $s >${quote(`${job.logFile}.rc`)}; ${say}) &`);
    }
    lines.push("wait");
  }
  for (const job of jobs) rmSync(`${job.logFile}.rc`, { force: true });
  // env: what this process sees now (Bun hands children the environment it started with).
  Bun.spawnSync(["sh", "-c", lines.join("\n")], { stdout: "inherit", stderr: "inherit", env: { ...process.env } });
  return jobs.filter((job) => !existsSync(`${job.logFile}.rc`) || readFileSync(`${job.logFile}.rc`, "utf8").trim() !== "0");
}

/** Compiles what is stale and links the shim; throws a ShimError with the compiler's output on failure. */
export function buildShim(plan: ShimBuildPlan, opts: BuildOptions): BuildResult {
  const started = performance.now();
  mkdirSync(opts.objDir, { recursive: true });
  const headerHash = sha(...readdirSync(plan.sourceDir).filter((f) => /\.(h|hpp|inc)$/.test(f)).sort().map((f) => readFileSync(join(plan.sourceDir, f))));
  const objects = plan.sources.map((src) => {
    const cu = src.endsWith(".cu");
    const compiler = cu ? [plan.toolchain.nvcc!, ...plan.nvccFlags] : [plan.toolchain.cxx, ...plan.cxxFlags];
    const obj = join(opts.objDir, `${objectName(src, plan.sourceDir)}.o`);
    const hash = sha(readFileSync(src), headerHash, compiler.join(" "));
    const fresh = !opts.force && existsSync(obj) && existsSync(`${obj}.hash`) && readFileSync(`${obj}.hash`, "utf8") === hash;
    return { src, obj, hash, fresh, job: { label: src.slice(plan.sourceDir.length + 1), argv: [...compiler, "-c", src, "-o", `${obj}.tmp`], logFile: `${obj}.log` } };
  });
  const stale = objects.filter((o) => !o.fresh);
  const jobs = Math.max(1, opts.jobs ?? (Number(process.env.VAGEN_BUILD_JOBS) || cpus().length));
  let failed = runJobs(stale.map((o) => o.job), jobs, opts.progressPrefix);
  // ffi/dist.cpp follows c10d's C++ API, which moves between libtorch versions. Rather than
  // lose the whole shim to it, build it without process groups (its entry points then say
  // so) and tell the user; every other op works, data parallel does not.
  const dist = stale.find((o) => o.job.label === "dist.cpp");
  if (dist && failed.length === 1 && failed[0] === dist.job) {
    const log = readFileSync(dist.job.logFile, "utf8").trim().split("\n").slice(0, 12).join("\n");
    process.stderr.write(`${opts.progressPrefix ?? "[shim]"} dist.cpp did not compile against torch ${plan.libtorch.version}; building the shim without process groups (data-parallel training unavailable). Compiler output (${dist.job.logFile}):\n${log}\n`);
    const stub = join(plan.sourceDir, "dist-stub.inc");
    const fallback = { ...dist.job, label: "dist-stub.inc", argv: [...dist.job.argv.slice(0, -4), "-c", "-x", "c++", stub, "-o", `${dist.obj}.tmp`], logFile: `${dist.obj}.stub.log` };
    // a different hash, so the next build tries the real one again
    dist.hash = `${dist.hash}|no-dist`;
    failed = runJobs([fallback], 1, opts.progressPrefix);
  }
  if (failed.length > 0) {
    const first = failed[0]!;
    const output = existsSync(first.logFile) ? readFileSync(first.logFile, "utf8").trim().split("\n").slice(0, 30).join("\n") : "";
    throw new ShimError(
      `compiling the libtorch shim failed in ${failed.map((j) => j.label).join(", ")} (torch ${plan.libtorch.version}):\n${output}`,
      `the full compiler output is in ${first.logFile}`,
    );
  }
  for (const o of stale) {
    renameSync(`${o.obj}.tmp`, o.obj);
    writeFileSync(`${o.obj}.hash`, o.hash);
  }
  const linkHash = sha(objects.map((o) => o.hash).join(","), plan.linkFlags.join(" "));
  const stamp = `${opts.output}.hash`;
  if (stale.length === 0 && existsSync(opts.output) && existsSync(stamp) && readFileSync(stamp, "utf8") === linkHash) {
    return { output: opts.output, rebuilt: false, compiled: [], seconds: (performance.now() - started) / 1000 };
  }
  // Linked under a name of its own, then renamed: the library appears whole or not at all.
  const tmp = `${opts.output}.tmp-${process.pid}`;
  const link = Bun.spawnSync([plan.toolchain.cxx, "-shared", "-o", tmp, ...objects.map((o) => o.obj), ...plan.linkFlags], { stdout: "pipe", stderr: "pipe", env: { ...process.env } });
  if (!link.success) {
    rmSync(tmp, { force: true });
    throw new ShimError(`linking the libtorch shim failed (torch ${plan.libtorch.version}):\n${link.stderr.toString().trim()}`, `link flags: ${plan.linkFlags.join(" ")}`);
  }
  renameSync(tmp, opts.output);
  writeFileSync(stamp, linkHash);
  if (opts.progressPrefix) process.stderr.write(`${opts.progressPrefix} linked ${opts.output} (${(statSync(opts.output).size / 1024).toFixed(0)} KiB)\n`);
  return { output: opts.output, rebuilt: true, compiled: stale.map((o) => o.job.label), seconds: (performance.now() - started) / 1000 };
}
