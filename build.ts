#!/usr/bin/env bun
/**
 * Builds vagen: the libtorch shim (ffi/*.cpp -> build/libvagen_torch.so) and the single
 * binary (dist/vagen), which carries the shim prebuilt for each libtorch it was built
 * against plus the shim's sources, to compile one on first use for any other libtorch.
 * Only what changed is rebuilt.
 *
 *   bun build.ts               shim + binary
 *   bun build.ts --shim-only   just the shim (what `bun test` needs)
 *   bun build.ts --force       rebuild everything
 *   bun build.ts --release     shim + binary + dist/vagen.sha256, for a download
 *
 * libtorch is found as the binary finds it at run time (src/shim/libtorch.ts: $LIBTORCH,
 * python3's torch package, Debian's /usr, ~/.cache/vagen/libtorch), and compiled for by
 * the same code (src/shim/compile.ts). With a CUDA libtorch and nvcc (from $CUDA_HOME,
 * /usr/local/cuda or PATH), ffi/*.cu adds vagen's fused kernels (static CUDA runtime);
 * VAGEN_CUDA_KERNELS=0 leaves them out and VAGEN_CUDA_ARCHS picks the GPU architectures
 * (default "80;90").
 *
 * Each shim built here is also kept in build/shims/<key>/ (key: libtorch version, C++
 * ABI, CUDA flavour) with a meta.json; the binary carries every one there that was built
 * from the current ffi/ sources and ABI version. So a shim built on another machine (a
 * CUDA one, say) rides along when its folder is copied into build/shims/ before
 * `bun build.ts`.
 */
import { createHash } from "node:crypto";
import { copyFileSync, existsSync, mkdirSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs";
import { basename, join, relative } from "node:path";
import { ShimAbiError, syncShimBindings } from "./scripts/shim-bindings.ts";
import { buildShim as compileShim, hashSources, isShimSource, planShimBuild } from "./src/shim/compile.ts";
import { ShimError } from "./src/shim/errors.ts";
import { parseShimMeta, shimKey, type ShimMeta } from "./src/shim/key.ts";
import { describe, findLibtorch, type Libtorch } from "./src/shim/libtorch.ts";

const ROOT = import.meta.dir;
const BUILD = join(ROOT, "build");
const FFI = join(ROOT, "ffi");
const SHIM = join(BUILD, "libvagen_torch.so");
const SHIMS = join(BUILD, "shims");
const EMBEDDED = join(BUILD, "embedded.ts");
const BINARY = join(ROOT, "dist", "vagen");

function log(msg: string): void {
  process.stderr.write(`[build] ${msg}\n`);
}

function fail(msg: string, hint?: string): never {
  process.stderr.write(`[build] error: ${msg}\n${hint ? `[build] hint: ${hint}\n` : ""}`);
  process.exit(1);
}

/**
 * Regenerates src/torch's symbol table and op codes from ffi/ when they are stale, and
 * stops the build on an unguarded entry point or an ABI change without a version bump.
 */
function syncBindings(): number {
  try {
    const { abi, stale } = syncShimBindings();
    if (stale.length > 0) log(`regenerated ${stale.join(", ")} from ffi/ (ABI version ${abi.version})`);
    return abi.version;
  } catch (err) {
    if (err instanceof ShimAbiError) fail(err.message);
    throw err;
  }
}

/** src/shim's errors end the build with their message and hint. */
function orFail<T>(f: () => T): T {
  try {
    return f();
  } catch (err) {
    if (err instanceof ShimError) fail(err.message, err.hint);
    throw err;
  }
}

export async function buildShim(force = false): Promise<Libtorch> {
  const abiVersion = syncBindings();
  const lt = orFail(findLibtorch);
  log(describe(lt));
  const plan = orFail(() => planShimBuild(lt, FFI));
  if (lt.cuda) log(plan.toolchain.nvcc ? `fused CUDA kernels with ${plan.toolchain.nvcc}` : "no nvcc found (or VAGEN_CUDA_KERNELS=0): building without the fused CUDA kernels");
  const result = orFail(() => compileShim(plan, { objDir: join(BUILD, "obj"), output: SHIM, force, progressPrefix: "[build]" }));
  if (!result.rebuilt) log("shim up to date");
  // Kept by key too, so the binary can carry it next to shims built elsewhere.
  const key = shimKey(lt);
  const meta: ShimMeta = {
    key,
    abiVersion,
    sourcesHash: plan.sourcesHash,
    buildHash: plan.buildHash,
    fusedKernels: plan.toolchain.nvcc !== undefined,
    libtorch: { version: lt.version, cxx11Abi: lt.cxx11Abi, cuda: lt.cuda, origin: lt.origin },
  };
  const dir = join(SHIMS, key);
  mkdirSync(dir, { recursive: true });
  copyFileSync(SHIM, join(dir, "libvagen_torch.so"));
  writeFileSync(join(dir, "meta.json"), `${JSON.stringify(meta, null, 2)}\n`);
  writeEmbedded(abiVersion);
  return lt;
}

/** The prebuilt shims in build/shims/ built from the current sources and ABI; the others are named and left out. */
function carriedShims(abiVersion: number): (ShimMeta & { file: string })[] {
  if (!existsSync(SHIMS)) return [];
  const sourcesHash = hashSources(FFI);
  const carried: (ShimMeta & { file: string })[] = [];
  for (const key of readdirSync(SHIMS).sort()) {
    const file = join(SHIMS, key, "libvagen_torch.so");
    const metaFile = join(SHIMS, key, "meta.json");
    const meta = existsSync(metaFile) && existsSync(file) ? parseShimMeta(readFileSync(metaFile, "utf8")) : undefined;
    if (!meta) log(`build/shims/${key}: no libvagen_torch.so with a valid meta.json, left out`);
    else if (meta.abiVersion !== abiVersion || meta.sourcesHash !== sourcesHash) log(`build/shims/${key}: built from other ffi/ sources, left out (rebuild it on its machine)`);
    else carried.push({ ...meta, file });
  }
  return carried;
}

/**
 * build/embedded.ts: what the binary carries, as file imports (so `bun build --compile`
 * embeds them): the prebuilt shims with their meta, and ffi/'s sources as text.
 */
function writeEmbedded(abiVersion: number): void {
  const shims = carriedShims(abiVersion);
  const sources = readdirSync(FFI).filter(isShimSource).sort();
  const lines = [
    "// Generated by build.ts: the prebuilt shims and the shim sources dist/vagen carries.",
    "// @ts-nocheck: file and text imports",
    ...shims.map((s, i) => `import shim${i} from ${JSON.stringify(`./${relative(BUILD, s.file)}`)} with { type: "file" };`),
    ...sources.map((f, i) => `import source${i} from ${JSON.stringify(`../ffi/${f}`)} with { type: "text" };`),
    "",
    "export const prebuilt = [",
    ...shims.map(({ file: _, ...meta }, i) => `  { ...${JSON.stringify(meta)}, path: shim${i} },`),
    "];",
    "",
    "export const sources = {",
    ...sources.map((f, i) => `  ${JSON.stringify(f)}: source${i},`),
    "};",
    "",
  ];
  const text = lines.join("\n");
  if (!existsSync(EMBEDDED) || readFileSync(EMBEDDED, "utf8") !== text) writeFileSync(EMBEDDED, text);
  log(`the binary carries ${shims.length} prebuilt shim(s)${shims.length ? ` (${shims.map((s) => s.key).join(", ")})` : ""} and ${sources.length} source files`);
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
  // ffi/ and build/shims/: the binary carries the sources and the prebuilt shims.
  for (const dir of ["src", "envs", "configs", "ffi", "build/shims"]) if (existsSync(join(ROOT, dir))) walk(join(ROOT, dir));
  // build.ts itself: a change to the bundler options (minify, source maps) rebuilds too.
  for (const f of ["package.json", "bun.lock", "build/embedded.ts", "build.ts"]) if (existsSync(join(ROOT, f))) h.update(readFileSync(join(ROOT, f)));
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

/**
 * dist/vagen.sha256, in sha256sum's format, so a download is checked with
 * `sha256sum -c vagen.sha256` next to the binary.
 */
export function writeChecksum(binary = BINARY): string {
  const digest = createHash("sha256").update(readFileSync(binary)).digest("hex");
  const file = `${binary}.sha256`;
  writeFileSync(file, `${digest}  ${basename(binary)}\n`);
  log(`wrote ${relative(ROOT, file)} (${digest})`);
  return file;
}

if (import.meta.main) {
  const args = new Set(process.argv.slice(2));
  const known = new Set(["--force", "--shim-only", "--release"]);
  for (const a of args) if (!known.has(a)) fail(`unknown option ${a}`, `expected one of ${[...known].join(", ")}`);
  const force = args.has("--force");
  await buildShim(force);
  if (!args.has("--shim-only")) await buildBinary(force);
  if (args.has("--release")) writeChecksum();
}
