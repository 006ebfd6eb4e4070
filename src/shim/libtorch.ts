/**
 * Finding libtorch on this machine, and reading what the shim must match: its version,
 * its C++ ABI and its CUDA flavour. Used at build time (build.ts, which also needs the
 * headers) and at run time (the loader, which needs only the libraries), so that both
 * agree on which libtorch is "the" libtorch.
 *
 * Looked for in this order:
 *   1. $LIBTORCH                    a libtorch directory (an official archive, or any tree
 *                                   with lib/libtorch_cpu.so)
 *   2. python3's torch package      pip torch; found without importing torch (fast)
 *   3. Debian's /usr                apt-get install libtorch-dev (or only libtorch1.13)
 *   4. <cache dir>/libtorch         an official archive unpacked into vagen's cache
 *
 * Nothing here imports torch or runs the CUDA toolkit; every fact comes from files.
 */
import { existsSync, readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { ShimError } from "./errors.ts";
import { cacheRoot } from "./paths.ts";

export type LibtorchOrigin = "LIBTORCH" | "python3" | "debian" | "cache";

export interface Libtorch {
  /** How it was found. */
  origin: LibtorchOrigin;
  /** The directory it was found in (the torch package, the archive, /usr). */
  root: string;
  /** Where libtorch_cpu.so and its siblings are. */
  libDir: string;
  /** The C++ headers: include dirs when they are installed, else empty (runtime-only). */
  includeDirs: string[];
  /** torch's version as it names itself ("1.13.0", "2.11.0+cu130"). */
  version: string;
  /** Built with the C++11 std::string ABI (_GLIBCXX_USE_CXX11_ABI=1). */
  cxx11Abi: boolean;
  /** The CUDA version it was built for ("13.0"), "unknown" when only its libraries say so, or null (CPU). */
  cuda: string | null;
}

const DEBIAN_LIB = "/usr/lib/x86_64-linux-gnu";

/** The libtorch libraries a shim links against, in the order they must be loaded. */
export function libtorchLibraries(lt: Libtorch): string[] {
  const names = lt.cuda ? ["libc10.so", "libc10_cuda.so", "libtorch_cpu.so", "libtorch_cuda.so", "libtorch.so"] : ["libc10.so", "libtorch_cpu.so"];
  return names.map((n) => join(lt.libDir, n)).filter((p) => existsSync(p));
}

/** `1.13.0` from torch/version.h, which sits in different places per layout. */
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

/** `1.13.0` from a versioned file name such as Debian's libtorch_cpu.so.1.13.0. */
function sonameVersion(libDir: string): string | undefined {
  let best: string | undefined;
  for (const f of readdirSync(libDir)) {
    const m = f.match(/^libtorch_cpu\.so\.(\d+\.\d+(?:\.\d+)?)$/);
    if (m && (!best || m[1]!.length > best.length)) best = m[1];
  }
  return best;
}

/** `__version__` and `cuda` of a torch package's version.py. */
export function parseVersionPy(text: string): { version?: string; cuda?: string | null } {
  const version = text.match(/^__version__\s*(?::[^=]*)?=\s*['"]([^'"]+)['"]/m)?.[1];
  const cudaLine = text.match(/^cuda\s*(?::[^=]*)?=\s*(.+)$/m)?.[1]?.trim();
  const cuda = cudaLine === undefined ? undefined : cudaLine.startsWith("None") ? null : cudaLine.match(/['"]([^'"]+)['"]/)?.[1];
  return { version, cuda };
}

/**
 * The C++ ABI. The cmake config records it (`-D_GLIBCXX_USE_CXX11_ABI=0|1`); without
 * one, libc10's exported symbols tell: the new ABI's std::string mangles as
 * `NSt7__cxx1112basic_string...`, the old one never mentions __cxx11.
 */
export function readCxx11Abi(root: string, libDir: string): boolean {
  for (const cmake of [join(root, "share", "cmake", "Torch", "TorchConfig.cmake"), join(libDir, "cmake", "Torch", "TorchConfig.cmake")]) {
    if (!existsSync(cmake)) continue;
    const flag = readFileSync(cmake, "utf8").match(/_GLIBCXX_USE_CXX11_ABI=([01])/)?.[1];
    if (flag !== undefined) return flag === "1";
  }
  const c10 = join(libDir, "libc10.so");
  if (!existsSync(c10)) return true;
  return readFileSync(c10).includes("St7__cxx11");
}

/** Reads a libtorch tree; undefined when `libDir` has no libtorch_cpu.so. */
export function describeLibtorch(origin: LibtorchOrigin, root: string, libDir: string, includeDirs: string[]): Libtorch | undefined {
  if (!existsSync(join(libDir, "libtorch_cpu.so"))) return undefined;
  const headers = includeDirs.filter((d) => existsSync(d));
  const hasHeaders = headers.some((d) => existsSync(join(d, "ATen", "ATen.h")));
  const versionPy = existsSync(join(root, "version.py")) ? parseVersionPy(readFileSync(join(root, "version.py"), "utf8")) : {};
  // Official archives name their build in build-version ("2.5.1+cu124").
  const buildVersion = existsSync(join(root, "build-version")) ? readFileSync(join(root, "build-version"), "utf8").trim() : undefined;
  const version = versionPy.version ?? buildVersion ?? headerVersion(headers) ?? sonameVersion(libDir) ?? "unknown";
  const hasCudaLibs = existsSync(join(libDir, "libtorch_cuda.so"));
  const tagged = version.match(/\+cu(\d+)(\d)$/);
  const cuda = !hasCudaLibs ? null : (versionPy.cuda ?? (tagged ? `${tagged[1]}.${tagged[2]}` : "unknown"));
  return {
    origin,
    root,
    libDir,
    includeDirs: hasHeaders ? headers : [],
    version,
    cxx11Abi: readCxx11Abi(root, libDir),
    cuda,
  };
}

/** A libtorch directory laid out as the official archives and pip torch are: include/ and lib/. */
export function fromDirectory(root: string, origin: LibtorchOrigin): Libtorch | undefined {
  return describeLibtorch(origin, root, join(root, "lib"), [join(root, "include"), join(root, "include", "torch", "csrc", "api", "include")]);
}

/** python3's torch package, found by importlib without importing it (importing takes seconds). */
function fromPython(python = process.env.VAGEN_PYTHON ?? "python3"): Libtorch | undefined {
  if (!Bun.which(python)) return undefined;
  const probe = Bun.spawnSync(
    [python, "-c", "import importlib.util as u; s = u.find_spec('torch'); print(s.submodule_search_locations[0] if s and s.submodule_search_locations else '')"],
    { stdout: "pipe", stderr: "ignore", env: { ...process.env } },
  );
  const root = probe.success ? probe.stdout.toString().trim() : "";
  return root ? fromDirectory(root, "python3") : undefined;
}

function fromDebian(): Libtorch | undefined {
  return describeLibtorch("debian", "/usr", DEBIAN_LIB, ["/usr/include", "/usr/include/torch/csrc/api/include"]);
}

function fromCache(): Libtorch | undefined {
  const root = join(cacheRoot(), "libtorch");
  return existsSync(root) ? fromDirectory(root, "cache") : undefined;
}

/** Where vagen looks, for messages. */
export const SEARCH_ORDER = "$LIBTORCH, python3's torch package, Debian's /usr, ~/.cache/vagen/libtorch";

export const INSTALL_HINT =
  "install one: pip install torch, or apt-get install libtorch-dev, or unpack an official libtorch archive and set LIBTORCH=/path/to/libtorch";

/** The libtorch this process will use; throws a ShimError saying what to install when none is found. */
export function findLibtorch(): Libtorch {
  const env = process.env.LIBTORCH;
  if (env) {
    const found = fromDirectory(env, "LIBTORCH");
    if (!found) throw new ShimError(`LIBTORCH=${env} is not a libtorch directory (expected ${join(env, "lib", "libtorch_cpu.so")})`, "point LIBTORCH at the directory that holds lib/ and include/, or unset it");
    return found;
  }
  const found = fromPython() ?? fromDebian() ?? fromCache();
  if (!found) throw new ShimError(`libtorch not found (looked at ${SEARCH_ORDER})`, INSTALL_HINT);
  return found;
}

/** One line for people: "torch 2.11.0+cu130 from python3 (/path), C++11 ABI, CUDA 13.0". */
export function describe(lt: Libtorch): string {
  return `torch ${lt.version} from ${lt.origin} (${lt.root}), ${lt.cxx11Abi ? "C++11 ABI" : "pre-C++11 ABI"}, ${lt.cuda ? `CUDA ${lt.cuda}` : "CPU only"}`;
}
