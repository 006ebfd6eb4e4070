#!/usr/bin/env bun
/**
 * One source of truth for the libtorch shim's ABI: the C++ in ffi/.
 *
 * The exported `VT_API` functions of ffi/*.cpp and the op-code X-macro lists of
 * ffi/ops.cpp are parsed here and written out as TypeScript:
 *
 *   src/torch/native-symbols.ts   the bun:ffi symbol table, ABI_VERSION, ABI_FINGERPRINT
 *   src/torch/opcodes.ts          op names and codes per calling shape
 *
 * so a hand-typed FFI signature can never disagree with C (that would be silent memory
 * corruption, not an error). build.ts runs syncShimBindings() before every shim build;
 * test/torch/shim-abi.test.ts fails when the committed files are stale.
 *
 * The parser also enforces two rules of ffi/shim.h: every entry point is wrapped in a
 * guard (VT_TRY ... VT_CATCH, VT_CATCH_RETURN(fallback) or VT_CATCH_VOID), so no C++
 * exception crosses into Bun; and no entry point sits inside #if, so the CPU-only shim
 * exports every symbol the table lists. A change to any signature or op list without a
 * bump of VT_ABI_VERSION (ffi/shim.h) is refused, so a stale shim is always detected at
 * load by its version.
 *
 *   bun scripts/shim-bindings.ts           rewrite the generated files
 *   bun scripts/shim-bindings.ts --check   exit 1 when they are stale
 */
import { createHash } from "node:crypto";
import { existsSync, readdirSync, readFileSync, writeFileSync } from "node:fs";
import { join, relative } from "node:path";

/** A source file of the shim, by its path relative to the repository root. */
export interface ShimSource {
  file: string;
  text: string;
}

/** The bun:ffi types the shim's C types map to. */
export type FfiType = "i32" | "i64" | "i64_fast" | "f64" | "ptr" | "cstring" | "void";

export interface ShimFunction {
  name: string;
  returns: FfiType;
  args: FfiType[];
  /** "ffi/core.cpp:63", for messages. */
  where: string;
  /** Whether the body is wrapped in VT_TRY ... VT_CATCH (or a VT_CATCH_* variant). */
  guarded: boolean;
}

export interface OpGroup {
  /** The group's name in vt_op_table ("unary", "index_inplace", ...). */
  name: string;
  /** Op names in code order: an op's code is its index. */
  ops: string[];
}

export interface ShimAbi {
  version: number;
  /** In file order (files sorted by name), as the symbol table lists them. */
  functions: ShimFunction[];
  opGroups: OpGroup[];
}

/** Thrown for anything in ffi/ the generator cannot turn into a binding. */
export class ShimAbiError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "ShimAbiError";
  }
}

const ROOT = join(import.meta.dir, "..");
export const GENERATED = {
  symbols: "src/torch/native-symbols.ts",
  opcodes: "src/torch/opcodes.ts",
} as const;

// ---- reading ffi/ ----------------------------------------------------------------------

/** The shim's sources (every .cpp and .cu of ffi/, sorted) and its header. */
export function readShimSources(root = ROOT): { header: ShimSource; sources: ShimSource[] } {
  const dir = join(root, "ffi");
  const load = (name: string): ShimSource => ({ file: `ffi/${name}`, text: readFileSync(join(dir, name), "utf8") });
  const names = readdirSync(dir).filter((f) => /\.(cpp|cu)$/.test(f)).sort();
  return { header: load("shim.h"), sources: names.map(load) };
}

/** Parses the ABI out of the header (VT_ABI_VERSION) and the sources. */
export function parseShimAbi(header: ShimSource, sources: ShimSource[]): ShimAbi {
  const version = header.text.match(/^#define\s+VT_ABI_VERSION\s+(\d+)\s*$/m)?.[1];
  if (version === undefined) throw new ShimAbiError(`${header.file}: expected a line "#define VT_ABI_VERSION <integer>"`);
  const functions = sources.flatMap(parseFunctions);
  const seen = new Map<string, string>();
  for (const fn of functions) {
    const earlier = seen.get(fn.name);
    if (earlier) throw new ShimAbiError(`${fn.where}: ${fn.name} is also defined at ${earlier}`);
    seen.set(fn.name, fn.where);
  }
  const ops = sources.find((s) => s.file.endsWith("/ops.cpp"));
  return { version: Number(version), functions, opGroups: ops ? parseOpGroups(ops) : [] };
}

/** Entry points whose body is not wrapped in a VT_TRY guard, as "file:line name". */
export function unguardedFunctions(abi: ShimAbi): string[] {
  return abi.functions.filter((f) => !f.guarded).map((f) => `${f.where} ${f.name}`);
}

/**
 * Blanks out comments and the contents of string and character literals (same length,
 * newlines kept), so braces, parentheses and keywords are only matched in code.
 */
export function maskCode(text: string): string {
  const out = text.split("");
  let i = 0;
  const blank = (from: number, to: number) => {
    for (let k = from; k < to; k++) if (out[k] !== "\n") out[k] = " ";
  };
  while (i < text.length) {
    const c = text[i]!;
    if (c === "/" && text[i + 1] === "/") {
      const end = text.indexOf("\n", i);
      const stop = end < 0 ? text.length : end;
      blank(i, stop);
      i = stop;
    } else if (c === "/" && text[i + 1] === "*") {
      const end = text.indexOf("*/", i + 2);
      const stop = end < 0 ? text.length : end + 2;
      blank(i, stop);
      i = stop;
    } else if (c === '"' || c === "'") {
      let k = i + 1;
      while (k < text.length && text[k] !== c && text[k] !== "\n") k += text[k] === "\\" ? 2 : 1;
      blank(i + 1, k);
      i = k + 1;
    } else {
      i++;
    }
  }
  return out.join("");
}

const DECLARATION = /\bVT_API\s+([A-Za-z_][\w\s*]*?)\s*\b(vt_\w+)\s*\(([^()]*)\)\s*(?:noexcept\s*)?\{/g;
const GUARD_END = /VT_CATCH(?:_VOID|_RETURN\s*\(.*\))?$/s;

function parseFunctions(source: ShimSource): ShimFunction[] {
  const code = maskCode(source.text);
  const functions: ShimFunction[] = [];
  for (const m of code.matchAll(DECLARATION)) {
    const start = m.index!;
    const line = code.slice(0, start).split("\n").length;
    const where = `${source.file}:${line}`;
    const name = m[2]!;
    const depth = preprocessorDepth(code.slice(0, start));
    if (depth > 0) {
      throw new ShimAbiError(
        `${where}: ${name} is inside #if; every entry point must be compiled in every build (put the #if inside the body)`,
      );
    }
    const open = start + m[0].length - 1;
    const close = matchingBrace(code, open, where);
    const body = code.slice(open + 1, close).trim();
    functions.push({
      name,
      returns: ffiType(normalizeType(m[1]!), "return", where, name),
      args: parseParams(m[3]!, where, name),
      where,
      guarded: body.startsWith("VT_TRY") && GUARD_END.test(body),
    });
  }
  // Any VT_API the declaration pattern missed (a function pointer parameter, a macro)
  // would silently drop out of the symbol table; refuse it instead.
  const declared = (code.match(/\bVT_API\b/g) ?? []).length;
  if (declared !== functions.length) {
    throw new ShimAbiError(
      `${source.file}: ${declared} VT_API declarations but only ${functions.length} parsed; write each as "VT_API <type> vt_name(<type> <name>, ...) {"`,
    );
  }
  return functions;
}

function preprocessorDepth(code: string): number {
  let depth = 0;
  for (const line of code.split("\n")) {
    const directive = line.match(/^\s*#\s*(\w+)/)?.[1];
    if (directive === "if" || directive === "ifdef" || directive === "ifndef") depth++;
    else if (directive === "endif") depth--;
  }
  return depth;
}

function matchingBrace(code: string, open: number, where: string): number {
  let depth = 0;
  for (let i = open; i < code.length; i++) {
    if (code[i] === "{") depth++;
    else if (code[i] === "}" && --depth === 0) return i;
  }
  throw new ShimAbiError(`${where}: the function body has no closing brace`);
}

function normalizeType(type: string): string {
  return type.replace(/\s*\*\s*/g, "*").replace(/\s+/g, " ").trim();
}

function parseParams(list: string, where: string, fn: string): FfiType[] {
  const params = list.trim();
  if (params === "" || params === "void") return [];
  return params.split(",").map((param, i) => {
    // "const double* values" -> type "const double*"; an unnamed "int32_t" stays whole.
    const tokens = param.replace(/\*/g, " * ").trim().split(/\s+/);
    const last = tokens[tokens.length - 1]!;
    const named = tokens.length > 1 && /^[A-Za-z_]\w*$/.test(last) && tokens[tokens.length - 2] !== "const";
    const type = normalizeType((named ? tokens.slice(0, -1) : tokens).join(" "));
    return ffiType(type, `parameter ${i + 1}`, where, fn);
  });
}

function ffiType(cType: string, role: string, where: string, fn: string): FfiType {
  const isReturn = role === "return";
  if (cType === "const char*") return "cstring";
  if (cType.endsWith("*")) return "ptr";
  if (cType === "int32_t") return "i32";
  // An int64 result comes back as a number when it fits (i64_fast), not a BigInt.
  if (cType === "int64_t") return isReturn ? "i64_fast" : "i64";
  if (cType === "double") return "f64";
  if (cType === "void" && isReturn) return "void";
  throw new ShimAbiError(
    `${where}: ${fn} ${isReturn ? "returns" : `has ${role} of type`} "${cType}"; the shim's ABI allows int32_t, int64_t, double, pointers and const char*${isReturn ? " (or void)" : ""}`,
  );
}

/**
 * The op groups of ops.cpp: build_op_table() names each group and its X-macro list
 * (`s << "unary:" VT_UNARY_OPS(VT_NAME) ";"`), and each list holds `X(name, expr)` rows.
 */
function parseOpGroups(source: ShimSource): OpGroup[] {
  const text = source.text;
  const groups: OpGroup[] = [];
  for (const m of text.matchAll(/"(\w+):"\s*(VT_\w+_OPS)\(VT_NAME\)/g)) {
    const [, name, macro] = m;
    const definition = text.match(new RegExp(`#define ${macro}\\(X\\)((?:[^\\n]*\\\\\\n)*[^\\n]*)`));
    if (!definition) throw new ShimAbiError(`${source.file}: build_op_table() names ${macro}, which is not defined there`);
    const ops = [...maskCode(definition[1]!).matchAll(/(?:^|[\s\\])X\(\s*(\w+)\s*,/g)].map((x) => x[1]!);
    if (ops.length === 0) throw new ShimAbiError(`${source.file}: ${macro} lists no ops`);
    const duplicate = ops.find((op, i) => ops.indexOf(op) !== i);
    if (duplicate) throw new ShimAbiError(`${source.file}: ${macro} lists "${duplicate}" twice`);
    groups.push({ name: name!, ops });
  }
  if (groups.length === 0) throw new ShimAbiError(`${source.file}: build_op_table() names no op groups`);
  return groups;
}

// ---- rendering TypeScript --------------------------------------------------------------

/** A hash of every signature and op list: equal fingerprints mean the same ABI. */
export function abiFingerprint(abi: ShimAbi): string {
  const signatures = abi.functions.map((f) => `${f.name}(${f.args.join(",")})${f.returns}`).sort();
  const ops = abi.opGroups.map((g) => `${g.name}:${g.ops.join(",")}`).sort();
  return createHash("sha256").update([...signatures, ...ops].join("\n")).digest("hex").slice(0, 16);
}

const BANNER = (what: string) =>
  `// THIS FILE IS GENERATED from ${what} by scripts/shim-bindings.ts; do not edit it.\n` +
  `// \`bun build.ts\` rewrites it, and test/torch/shim-abi.test.ts fails when it is stale.\n`;

function ffiLiteral(type: FfiType): string {
  return type === "i64_fast" ? "FFIType.i64_fast" : `"${type}"`;
}

export function renderSymbols(abi: ShimAbi): string {
  const lines: string[] = [];
  let file = "";
  for (const fn of abi.functions) {
    const fnFile = fn.where.split(":")[0]!;
    if (fnFile !== file) lines.push(`  // ${relative("ffi", fnFile)}`);
    file = fnFile;
    lines.push(`  ${fn.name}: { args: [${fn.args.map(ffiLiteral).join(", ")}], returns: ${ffiLiteral(fn.returns)} },`);
  }
  return `${BANNER("the VT_API functions of ffi/*.cpp")}import { FFIType } from "bun:ffi";

/** The shim's ABI version (VT_ABI_VERSION in ffi/shim.h); loadTorch refuses a shim with another. */
export const ABI_VERSION = ${abi.version};

/** A hash of every signature and op list; a change without a new ABI_VERSION fails the build. */
export const ABI_FINGERPRINT = "${abiFingerprint(abi)}";

/** Every native entry point with its argument types, in the order of ffi/. */
export const SYMBOLS = {
${lines.join("\n")}
} as const;
`;
}

export function renderOpcodes(abi: ShimAbi): string {
  const names = abi.opGroups.map((g) => `  ${g.name}: [${g.ops.map((op) => `"${op}"`).join(", ")}],`);
  const codes = abi.opGroups.map((g) => `  ${g.name}: { ${g.ops.map((op, i) => `${op}: ${i}`).join(", ")} },`);
  return `${BANNER("the X-macro op lists of ffi/ops.cpp")}
/** Op names per calling shape, in code order (the shim publishes the same lists as vt_op_table). */
export const OP_GROUPS = {
${names.join("\n")}
} as const;

/** Op codes by group and name: an op's code is its index in its X-macro list. */
export const OPS = {
${codes.join("\n")}
} as const;

export type OpGroupName = keyof typeof OP_GROUPS;
export type OpName<G extends OpGroupName> = (typeof OP_GROUPS)[G][number];
export type OpCodes = typeof OPS;
`;
}

// ---- keeping the generated files in step -----------------------------------------------

/** The version and fingerprint a generated symbol file was written for. */
export function generatedAbi(symbolsFile: string): { version: number; fingerprint: string } | undefined {
  const version = symbolsFile.match(/export const ABI_VERSION = (\d+);/)?.[1];
  const fingerprint = symbolsFile.match(/export const ABI_FINGERPRINT = "(\w+)";/)?.[1];
  return version && fingerprint ? { version: Number(version), fingerprint } : undefined;
}

/**
 * Refuses an ABI change (a new fingerprint) that kept the version of the committed
 * bindings: a shim built before the change would otherwise pass the load-time check.
 */
export function checkVersionBump(committedSymbols: string | undefined, abi: ShimAbi): void {
  const committed = committedSymbols ? generatedAbi(committedSymbols) : undefined;
  if (!committed) return;
  if (committed.version === abi.version && committed.fingerprint !== abiFingerprint(abi)) {
    throw new ShimAbiError(
      `the shim's ABI changed (signatures or op lists in ffi/ differ from ${GENERATED.symbols}) but VT_ABI_VERSION in ffi/shim.h is still ${abi.version}; set it to ${abi.version + 1}`,
    );
  }
}

export interface SyncResult {
  abi: ShimAbi;
  /** Generated files whose content differs from what ffi/ gives (rewritten unless checkOnly). */
  stale: string[];
}

/**
 * Parses ffi/, checks the guards and the version bump, and rewrites the generated files
 * that differ (or only reports them with checkOnly). Throws ShimAbiError on any breach.
 */
export function syncShimBindings(options: { root?: string; checkOnly?: boolean } = {}): SyncResult {
  const root = options.root ?? ROOT;
  const { header, sources } = readShimSources(root);
  const abi = parseShimAbi(header, sources);
  const unguarded = unguardedFunctions(abi);
  if (unguarded.length > 0) {
    throw new ShimAbiError(
      `entry points without a VT_TRY ... VT_CATCH guard (a C++ exception would cross into Bun and abort):\n  ${unguarded.join("\n  ")}`,
    );
  }
  const read = (path: string) => (existsSync(join(root, path)) ? readFileSync(join(root, path), "utf8") : undefined);
  checkVersionBump(read(GENERATED.symbols), abi);
  const wanted: [string, string][] = [
    [GENERATED.symbols, renderSymbols(abi)],
    [GENERATED.opcodes, renderOpcodes(abi)],
  ];
  const stale = wanted.filter(([path, text]) => read(path) !== text).map(([path]) => path);
  if (!options.checkOnly) for (const [path, text] of wanted) if (stale.includes(path)) writeFileSync(join(root, path), text);
  return { abi, stale };
}

if (import.meta.main) {
  const checkOnly = process.argv.includes("--check");
  try {
    const { abi, stale } = syncShimBindings({ checkOnly });
    const summary = `ABI ${abi.version}, ${abi.functions.length} entry points, ${abi.opGroups.length} op groups`;
    if (stale.length === 0) console.log(`shim bindings up to date (${summary})`);
    else if (checkOnly) {
      console.error(`stale: ${stale.join(", ")}; run \`bun scripts/shim-bindings.ts\``);
      process.exit(1);
    } else console.log(`wrote ${stale.join(", ")} (${summary})`);
  } catch (err) {
    if (!(err instanceof ShimAbiError)) throw err;
    console.error(`error: ${err.message}`);
    process.exit(1);
  }
}
