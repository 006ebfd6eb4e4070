/**
 * The shim's ABI has one source of truth, ffi/: the committed bindings equal what the
 * generator makes of it, every entry point is guarded, an ABI change needs a version
 * bump, and a shim of another ABI version is refused at load.
 */
import { describe, expect, test } from "bun:test";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import {
  GENERATED,
  ShimAbiError,
  abiFingerprint,
  checkVersionBump,
  parseShimAbi,
  readShimSources,
  renderOpcodes,
  renderSymbols,
  unguardedFunctions,
  type ShimSource,
} from "../../scripts/shim-bindings.ts";
import { ABI_VERSION } from "../../src/torch/native-symbols.ts";
import { OPS } from "../../src/torch/opcodes.ts";
import { checkAbiVersion, checkOpTable, loadTorch } from "../../src/torch/native.ts";
import { TorchUnavailableError } from "../../src/torch/errors.ts";

const ROOT = join(import.meta.dir, "..", "..");
const HEADER: ShimSource = { file: "ffi/shim.h", text: "#define VT_ABI_VERSION 7\n" };

function parse(text: string, file = "ffi/x.cpp") {
  return parseShimAbi(HEADER, [{ file, text }]);
}

describe("the committed bindings", () => {
  const { header, sources } = readShimSources(ROOT);
  const abi = parseShimAbi(header, sources);

  test("equal what the generator makes of ffi/ (run `bun build.ts --shim-only` when this fails)", () => {
    expect(readFileSync(join(ROOT, GENERATED.symbols), "utf8")).toBe(renderSymbols(abi));
    expect(readFileSync(join(ROOT, GENERATED.opcodes), "utf8")).toBe(renderOpcodes(abi));
  });

  test("every exported function of ffi/ catches C++ exceptions", () => {
    expect(unguardedFunctions(abi)).toEqual([]);
  });

  test("vt_is_inference is a guarded status entry with an out slot", () => {
    const fn = abi.functions.find((f) => f.name === "vt_is_inference")!;
    expect(fn).toMatchObject({ args: ["ptr", "ptr"], returns: "i32", guarded: true });
  });

  test("the loaded shim reports the generated ABI version and op lists", () => {
    const shim = loadTorch();
    expect(shim.vt_abi_version()).toBe(ABI_VERSION);
    expect(() => checkOpTable("the shim", String(shim.vt_op_table()))).not.toThrow();
    expect(OPS.unary.neg).toBe(0);
  });
});

describe("parsing ffi/", () => {
  test("maps C types to bun:ffi types, across lines and with unnamed parameters", () => {
    const abi = parse(`
VT_API int32_t vt_a(void* h, const double* shape, int32_t,
                    int64_t n, double x, const char* path, char* buf, double* out) {
  VT_TRY
  out[0] = 1;
  VT_CATCH
}
VT_API int64_t vt_b() {
  VT_TRY
  return 1;
  VT_CATCH_RETURN(-1)
}
VT_API const char* vt_c(void) { VT_TRY return "}"; VT_CATCH_RETURN("") }
VT_API void vt_d(void* p) { VT_TRY delete static_cast<int*>(p); VT_CATCH_VOID }
`);
    expect(abi.version).toBe(7);
    expect(abi.functions.map(({ name, args, returns }) => ({ name, args, returns }))).toEqual([
      { name: "vt_a", args: ["ptr", "ptr", "i32", "i64", "f64", "cstring", "ptr", "ptr"], returns: "i32" },
      { name: "vt_b", args: [], returns: "i64_fast" },
      { name: "vt_c", args: [], returns: "cstring" },
      { name: "vt_d", args: ["ptr"], returns: "void" },
    ]);
    expect(unguardedFunctions(abi)).toEqual([]);
  });

  test("finds entry points without a guard, however short", () => {
    const abi = parse(`// VT_TRY in a comment does not count
VT_API int32_t vt_flag() { return 1; }

VT_API int32_t vt_half(void* h) {
  VT_TRY
  return 0;
}
`);
    expect(unguardedFunctions(abi)).toEqual(["ffi/x.cpp:2 vt_flag", "ffi/x.cpp:4 vt_half"]);
  });

  test("refuses a type outside the ABI, naming the file, line and function", () => {
    expect(() => parse("\nVT_API int32_t vt_f(float x) { VT_TRY VT_CATCH }")).toThrow(
      'ffi/x.cpp:2: vt_f has parameter 1 of type "float"; the shim\'s ABI allows int32_t, int64_t, double, pointers and const char*',
    );
  });

  test("refuses an entry point that only some builds compile", () => {
    expect(() => parse("#ifdef VAGEN_WITH_CUDA\nVT_API int32_t vt_g() { VT_TRY VT_CATCH }\n#endif\n")).toThrow(
      "ffi/x.cpp:2: vt_g is inside #if",
    );
    expect(() => parse("#ifdef A\n#endif\nVT_API int32_t vt_g() { VT_TRY VT_CATCH }\n")).not.toThrow();
  });

  test("refuses a declaration it cannot read rather than dropping it", () => {
    expect(() => parse("VT_API int32_t vt_cb(void (*fn)(int)) { VT_TRY VT_CATCH }")).toThrow(ShimAbiError);
  });

  test("refuses a header without VT_ABI_VERSION", () => {
    expect(() => parseShimAbi({ file: "ffi/shim.h", text: "" }, [])).toThrow('ffi/shim.h: expected a line "#define VT_ABI_VERSION <integer>"');
  });

  test("reads op groups from build_op_table and numbers ops by their place in the X-macro list", () => {
    const abi = parse(
      `#define VT_UNARY_OPS(X) \\
  X(neg, at::neg(a))       \\
  X(exp, at::max(a, X(b))) \\
  X(t, a.t())
#define VT_PAIR_OPS(X) X(sort, at::sort(a, i0, i1 != 0))
std::string build_op_table() {
  s << "unary:" VT_UNARY_OPS(VT_NAME) ";";
  s << "pair:" VT_PAIR_OPS(VT_NAME) ";";
}`,
      "ffi/ops.cpp",
    );
    expect(abi.opGroups).toEqual([
      { name: "unary", ops: ["neg", "exp", "t"] },
      { name: "pair", ops: ["sort"] },
    ]);
    expect(renderOpcodes(abi)).toContain("  unary: { neg: 0, exp: 1, t: 2 },");
  });
});

describe("the ABI version", () => {
  const before = parse("VT_API int32_t vt_f(void* h) { VT_TRY VT_CATCH }");
  const changed = parse("VT_API int32_t vt_f(void* h, double* out) { VT_TRY VT_CATCH }");

  test("a signature change changes the fingerprint; a comment or parameter name does not", () => {
    expect(abiFingerprint(changed)).not.toBe(abiFingerprint(before));
    expect(abiFingerprint(parse("// x\nVT_API int32_t vt_f(void* tensor) { VT_TRY VT_CATCH }"))).toBe(abiFingerprint(before));
  });

  test("an ABI change that keeps the version is refused with the number to set", () => {
    expect(() => checkVersionBump(renderSymbols(before), changed)).toThrow(
      "VT_ABI_VERSION in ffi/shim.h is still 7; set it to 8",
    );
    expect(() => checkVersionBump(renderSymbols(before), { ...changed, version: 8 })).not.toThrow();
    expect(() => checkVersionBump(renderSymbols(before), before)).not.toThrow();
  });

  test("a shim of another version is refused, naming its path and both versions", () => {
    expect(() => checkAbiVersion("/x/libvagen_torch.so", ABI_VERSION)).not.toThrow();
    const refusal = () => checkAbiVersion("/x/libvagen_torch.so", ABI_VERSION - 1);
    expect(refusal).toThrow(TorchUnavailableError);
    expect(refusal).toThrow(`the libtorch shim /x/libvagen_torch.so has ABI version ${ABI_VERSION - 1}, but this vagen needs ABI version ${ABI_VERSION}`);
  });

  test("a shim whose op lists differ is refused, naming the group", () => {
    const table = Object.entries(OPS).map(([group, ops]) => `${group}:${Object.keys(ops).join(",")},;`).join("");
    expect(() => checkOpTable("s.so", table)).not.toThrow();
    expect(() => checkOpTable("s.so", table.replace("unary:neg,abs,", "unary:abs,neg,"))).toThrow(
      "the libtorch shim s.so numbers its unary ops differently from this vagen",
    );
  });
});

describe("loading a stale shim", () => {
  // Real libraries compiled on the spot, each loaded in a child process (a process loads
  // its shim once): what loadTorch() throws, as "name: message".
  function loadError(source: string): string {
    const dir = mkdtempSync(join(tmpdir(), "vagen-abi-"));
    try {
      const shim = join(dir, "libstale.so");
      writeFileSync(join(dir, "stale.cpp"), source);
      const cc = Bun.spawnSync([process.env.CXX ?? "g++", "-shared", "-fPIC", "-o", shim, join(dir, "stale.cpp")], { stderr: "pipe" });
      expect(cc.stderr.toString()).toBe("");
      const load = `import("${join(ROOT, "src/torch/native.ts")}").then((m) => m.loadTorch()).catch((e) => console.log(e.name + ": " + e.message))`;
      const child = Bun.spawnSync([process.execPath, "-e", load], { env: { ...process.env, VAGEN_TORCH_SHIM: shim }, stdout: "pipe" });
      return child.stdout.toString().trim().replaceAll(shim, "SHIM");
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  }

  test("another version stops the load with the shim's path and both versions, before any other symbol", () => {
    expect(loadError(`extern "C" int vt_abi_version() { return ${ABI_VERSION + 40}; }\n`)).toBe(
      `TorchUnavailableError: the libtorch shim SHIM has ABI version ${ABI_VERSION + 40}, but this vagen needs ABI version ${ABI_VERSION}`,
    );
  });

  test("a shim without vt_abi_version is refused too", () => {
    expect(loadError(`extern "C" int vt_last_error() { return 0; }\n`)).toBe(
      `TorchUnavailableError: the libtorch shim SHIM has no vt_abi_version(), so its ABI is unknown; this vagen needs ABI version ${ABI_VERSION}`,
    );
  });
});
