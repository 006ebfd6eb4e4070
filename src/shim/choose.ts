/**
 * Picking the shim for this machine's libtorch: a prebuilt one the binary carries, else
 * one compiled earlier into the cache, else one compiled now (once) from the sources the
 * binary carries. The caller loads it and, when a cached one fails to load, asks again
 * with `rebuild`.
 */
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, renameSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { buildShim, hashSourceFiles, planShimBuild, type ShimBuildPlan } from "./compile.ts";
import { embedded, type PrebuiltShim } from "./embedded.ts";
import { ShimError } from "./errors.ts";
import { parseShimMeta, shimKey, type ShimMeta } from "./key.ts";
import { describe, findLibtorch, type Libtorch } from "./libtorch.ts";
import { shimCacheDir, tildify } from "./paths.ts";

export type ShimSource = "override" | "prebuilt" | "cached" | "built";

export interface ShimChoice {
  path: string;
  source: ShimSource;
  /** Why this one, for `vagen doctor`. */
  reason: string;
  /** The libtorch it is for (undefined for VAGEN_TORCH_SHIM: whatever its rpath finds). */
  libtorch?: Libtorch;
  key?: string;
  /** Seconds the compile took, when it was built now. */
  buildSeconds?: number;
}

export interface ChooseOptions {
  /** The ABI version the bindings were generated for (VT_ABI_VERSION). */
  abiVersion: number;
  /** Skip prebuilt and cached shims and compile again (a cached one failed to load). */
  rebuild?: boolean;
  /** Prefix of the progress lines while compiling; quiet when undefined. */
  progressPrefix?: string;
}

const LIBRARY = "libvagen_torch.so";

function matchingPrebuilt(key: string, abiVersion: number, sourcesHash: string | undefined): PrebuiltShim | undefined {
  return embedded().prebuilt.find((p) => p.key === key && p.abiVersion === abiVersion && (sourcesHash === undefined || p.sourcesHash === sourcesHash));
}

function readMeta(dir: string): ShimMeta | undefined {
  const file = join(dir, "meta.json");
  return existsSync(file) && existsSync(join(dir, LIBRARY)) ? parseShimMeta(readFileSync(file, "utf8")) : undefined;
}

/** A cached shim for `key` built from these sources and this ABI, any flags: the fallback when no compiler is at hand. */
function anyCached(key: string, abiVersion: number, sourcesHash: string): string | undefined {
  const root = shimCacheDir();
  if (!existsSync(root)) return undefined;
  for (const name of readdirSync(root).filter((n) => n.startsWith(`${key}-`)).sort()) {
    const meta = readMeta(join(root, name));
    if (meta && meta.abiVersion === abiVersion && meta.sourcesHash === sourcesHash) return join(root, name);
  }
  return undefined;
}

/** Writes the carried sources into `dir`, so the compiler can read them (and include shim.h). */
function writeSources(dir: string, sources: Record<string, string>): void {
  mkdirSync(dir, { recursive: true });
  for (const [name, text] of Object.entries(sources)) writeFileSync(join(dir, name), text);
}

/**
 * Compiles the shim into the cache. Everything happens in a folder of this process's
 * own, renamed into place at the end, so a crash or a concurrent build never leaves a
 * half-written shim where a later run would pick it up.
 */
function compileIntoCache(lt: Libtorch, dir: string, opts: ChooseOptions, sources: Record<string, string>): { plan: ShimBuildPlan; seconds: number } {
  const work = `${dir}.build-${process.pid}`;
  rmSync(work, { recursive: true, force: true });
  try {
    writeSources(join(work, "src"), sources);
    const plan = planShimBuild(lt, join(work, "src"));
    const result = buildShim(plan, { objDir: join(work, "obj"), output: join(work, LIBRARY), progressPrefix: opts.progressPrefix });
    const meta: ShimMeta = {
      key: shimKey(lt),
      abiVersion: opts.abiVersion,
      sourcesHash: plan.sourcesHash,
      buildHash: plan.buildHash,
      fusedKernels: plan.toolchain.nvcc !== undefined,
      libtorch: { version: lt.version, cxx11Abi: lt.cxx11Abi, cuda: lt.cuda, origin: lt.origin },
    };
    writeFileSync(join(work, "meta.json"), `${JSON.stringify(meta, null, 2)}\n`);
    // Objects and sources served their purpose (the binary carries the sources).
    rmSync(join(work, "obj"), { recursive: true, force: true });
    rmSync(join(work, "src"), { recursive: true, force: true });
    const present = readMeta(dir);
    if (!opts.rebuild && present?.buildHash === plan.buildHash && present.abiVersion === opts.abiVersion) {
      // Another process finished the same build first (and may have loaded it): keep its.
      rmSync(work, { recursive: true, force: true });
      return { plan, seconds: result.seconds };
    }
    // The old folder moves aside before the new one moves in, so the path never holds a
    // mix of the two; a process that loaded the old library keeps its (unlinked) copy.
    const old = `${dir}.old-${process.pid}`;
    if (existsSync(dir)) renameSync(dir, old);
    renameSync(work, dir);
    rmSync(old, { recursive: true, force: true });
    return { plan, seconds: result.seconds };
  } catch (err) {
    // A failed build is kept apart (never under a name a later run would load) for its logs.
    const failed = `${dir}.failed`;
    rmSync(failed, { recursive: true, force: true });
    if (existsSync(work)) renameSync(work, failed);
    if (err instanceof ShimError) throw new ShimError(err.message, (err.hint ?? "").replaceAll(work, failed));
    throw err;
  }
}

/** The shim this process should load; compiles it (once per libtorch build) when needed. */
export function chooseShim(opts: ChooseOptions): ShimChoice {
  const override = process.env.VAGEN_TORCH_SHIM;
  if (override) {
    if (!existsSync(override)) throw new ShimError(`VAGEN_TORCH_SHIM points to ${override}, which does not exist`, "unset VAGEN_TORCH_SHIM, or point it at a built libvagen_torch.so");
    return { path: override, source: "override", reason: "VAGEN_TORCH_SHIM is set" };
  }
  const lt = findLibtorch();
  const key = shimKey(lt);
  const { sources } = embedded();
  const sourceNames = Object.keys(sources);
  const sourcesHash = sourceNames.length > 0 ? hashSourceFiles(sources) : undefined;

  if (!opts.rebuild) {
    const prebuilt = matchingPrebuilt(key, opts.abiVersion, sourcesHash);
    if (prebuilt) return { path: prebuilt.path, source: "prebuilt", reason: `carried by this vagen for ${describe(lt)}`, libtorch: lt, key };
  }
  if (!sourcesHash) throw new ShimError(`no prebuilt shim for ${describe(lt)}, and this vagen carries no shim sources to compile one`, "build vagen with `bun build.ts`");

  let plan: ShimBuildPlan | undefined;
  let planError: ShimError | undefined;
  try {
    // Planning reads the flags (and checks the toolchain) without compiling anything.
    plan = planFor(lt, sources);
  } catch (err) {
    if (!(err instanceof ShimError)) throw err;
    planError = err;
  }
  if (!plan) {
    // No compiler or headers: a shim compiled earlier for this libtorch still serves.
    const dir = opts.rebuild ? undefined : anyCached(key, opts.abiVersion, sourcesHash);
    if (dir) return { path: join(dir, LIBRARY), source: "cached", reason: `compiled earlier for ${describe(lt)} (${tildify(dir)})`, libtorch: lt, key };
    throw new ShimError(
      `no prebuilt shim for ${describe(lt)}, so vagen must compile one once, and cannot: ${planError!.message}`,
      planError!.hint ?? "install g++ and libtorch's headers",
    );
  }
  const dir = join(shimCacheDir(), `${key}-${plan.buildHash}`);
  const meta = readMeta(dir);
  if (!opts.rebuild && meta && meta.abiVersion === opts.abiVersion && meta.buildHash === plan.buildHash) {
    return { path: join(dir, LIBRARY), source: "cached", reason: `compiled earlier for ${describe(lt)} (${tildify(dir)})`, libtorch: lt, key };
  }
  if (opts.progressPrefix) {
    const what = opts.rebuild
      ? `compiling the shim for ${describe(lt)} again into ${tildify(dir)}`
      : `no prebuilt shim for ${describe(lt)}: compiling one into ${tildify(dir)} (once; from seconds on many cores to minutes on a few)`;
    process.stderr.write(`${opts.progressPrefix} ${what}\n`);
  }
  const built = compileIntoCache(lt, dir, opts, sources);
  if (opts.progressPrefix) process.stderr.write(`${opts.progressPrefix} shim ready (${built.seconds.toFixed(1)} s)\n`);
  return {
    path: join(dir, LIBRARY),
    source: "built",
    reason: `${opts.rebuild ? "rebuilt" : "compiled now"} for ${describe(lt)} (${tildify(dir)}, ${built.seconds.toFixed(1)} s)`,
    libtorch: lt,
    key,
    buildSeconds: built.seconds,
  };
}

/** Plans a build of the carried sources (planning reads them as files: a temporary folder). */
function planFor(lt: Libtorch, sources: Record<string, string>): ShimBuildPlan {
  const dir = mkdtempSync(join(tmpdir(), "vagen-shim-plan-"));
  try {
    writeSources(dir, sources);
    return planShimBuild(lt, dir);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}
