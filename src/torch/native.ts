/**
 * Loading the libtorch shim (build/libvagen_torch.so) through bun:ffi.
 *
 * Calling convention (see ffi/shim.h): every entry returns 0 on success and writes its
 * results into a Float64Array (`OUT`), one pointer-sized slot per result. Handles are
 * plain numbers. Integer-list arguments are written into `ARGS` and passed by address.
 * Both buffers are allocated once, so an op does no allocation on the TypeScript side
 * beyond its result object.
 *
 * The symbol table (native-symbols.ts) and the op codes (opcodes.ts) are generated from
 * ffi/ by scripts/shim-bindings.ts, so signatures cannot drift from the C++. At load the
 * shim's vt_abi_version() must equal the version they were generated for, and its
 * published op lists must equal the generated ones; any other shim is refused.
 */
import { dlopen, ptr, type Pointer } from "bun:ffi";
import { existsSync } from "node:fs";
import { TorchError, TorchUnavailableError } from "./errors.ts";
import { ABI_VERSION, SYMBOLS } from "./native-symbols.ts";
import { OP_GROUPS, OPS } from "./opcodes.ts";

function open(path: string) {
  return dlopen(path, SYMBOLS);
}

type RawShim = ReturnType<typeof open>["symbols"];

/**
 * The symbols with pointer parameters widened to plain numbers: handles are numbers read
 * from OUT (Bun passes numbers as pointers unchanged), so no cast is needed at each call.
 */
export type Shim = {
  [K in keyof RawShim]: RawShim[K] extends (...args: infer A) => infer R
    ? (...args: { [I in keyof A]: Pointer extends A[I] ? A[I] | number : A[I] }) => R
    : RawShim[K];
};

/** Result slots written by the native side. 4096 slots bound split() and similar. */
export const OUT = new Float64Array(new ArrayBuffer(8 * 4096));
/** Argument scratch for integer lists and handle lists. */
export const ARGS = new Float64Array(new ArrayBuffer(8 * 4096));
export const OUT_PTR: Pointer = ptr(OUT);
export const ARGS_PTR: Pointer = ptr(ARGS);

/** Address of ARGS[offset] (8-byte slots), for passing several lists in one call. */
export function argsAt(offset: number): Pointer {
  return (ARGS_PTR + offset * 8) as Pointer;
}

/** The loaded shim. Only valid after loadTorch(); every Tensor implies it is loaded. */
export let S: Shim = undefined as unknown as Shim;
/** Op codes by group and name, generated from ffi/ops.cpp and checked against the shim at load. */
export { OPS };

let loadedPath: string | undefined;
let loadFailure: TorchUnavailableError | undefined;

export interface TorchInfo {
  /** Path of the loaded shim library. */
  shim: string;
  /** libtorch version the shim was built against (TORCH_VERSION). */
  torchVersion: string;
  /** Whether the shim was compiled with CUDA support. */
  cudaBuild: boolean;
  /** Number of visible CUDA devices (0 without CUDA). */
  cudaDevices: number;
  /** Threads libtorch uses for intra-op parallelism on the CPU. */
  threads: number;
  /** Whether scaled_dot_product_attention uses libtorch's fused kernels. */
  fusedAttention: boolean;
  /** Whether the shim has vagen's own fused CUDA kernels (and they are enabled). */
  fusedKernels: boolean;
}

function resolveShimPath(): string {
  const override = process.env.VAGEN_TORCH_SHIM;
  if (override) {
    if (!existsSync(override)) {
      throw new TorchUnavailableError(
        `VAGEN_TORCH_SHIM points to ${override}, which does not exist`,
        "unset VAGEN_TORCH_SHIM, or point it at a built libvagen_torch.so",
      );
    }
    return override;
  }
  try {
    // Lazily required: the asset import fails when the shim has not been built.
    return require("./shim-path.ts").default as string;
  } catch (err) {
    throw new TorchUnavailableError(
      `the libtorch shim (build/libvagen_torch.so) has not been built: ${(err as Error).message}`,
      "run `bun run build` (or `bun build.ts --shim-only`); it needs libtorch: apt-get install libtorch-dev",
    );
  }
}

/** Loads the shim once. Throws TorchUnavailableError (with a fix-it hint) on failure. */
export function loadTorch(): Shim {
  if (loadedPath !== undefined) return S;
  if (loadFailure) throw loadFailure;
  try {
    const path = resolveShimPath();
    // The version first, through a table of one symbol: a stale shim must be refused
    // before its other symbols are looked up (or, worse, called with other signatures).
    const probe = openAbiProbe(path);
    checkAbiVersion(path, probe.symbols.vt_abi_version());
    let lib: ReturnType<typeof open>;
    try {
      lib = open(path);
    } catch (err) {
      throw new TorchUnavailableError(`cannot load the libtorch shim ${path}: ${(err as Error).message}`, rebuildHint());
    }
    probe.close();
    S = lib.symbols as unknown as Shim;
    checkOpTable(path, String(S.vt_op_table()));
    // cuDNN crashes inside the process on CUDA (torch 2.11 + cu130 on an H200): its
    // attention engines (bf16) and its convolutions (every dtype, from the first call)
    // call through a null function pointer, while the same calls work from Python. So
    // vagen starts with cuDNN off: SDPA uses the flash and memory-efficient kernels and
    // convolutions use libtorch's own CUDA kernels. torch.cuda.cudnn({ enabled: true })
    // and F.sdpBackends({ cudnn: true }) turn it back on. No effect on CPU builds.
    check(S.vt_sdp_backends(-1, -1, 0, -1, OUT_PTR));
    if (S.vt_has_cuda_build() === 1) check(S.vt_cudnn_flags(0, -1, -1, OUT_PTR));
    loadedPath = path;
    return S;
  } catch (err) {
    if (err instanceof TorchUnavailableError) loadFailure = err;
    throw err;
  }
}

/** The fix for a shim that does not match this vagen, by where the shim came from. */
function rebuildHint(): string {
  return process.env.VAGEN_TORCH_SHIM
    ? "point VAGEN_TORCH_SHIM at a libvagen_torch.so built from this vagen's ffi/ (or unset it)"
    : "rebuild it: `bun build.ts --shim-only`";
}

function openAbiProbe(path: string) {
  try {
    return dlopen(path, { vt_abi_version: { args: [], returns: "i32" } });
  } catch (err) {
    const message = (err as Error).message;
    if (message.includes("vt_abi_version")) {
      throw new TorchUnavailableError(
        `the libtorch shim ${path} has no vt_abi_version(), so its ABI is unknown; this vagen needs ABI version ${ABI_VERSION}`,
        rebuildHint(),
      );
    }
    throw new TorchUnavailableError(
      `cannot load the libtorch shim ${path}: ${message}`,
      "install libtorch (apt-get install libtorch-dev) or rebuild the shim against the installed one: `bun run build`",
    );
  }
}

/**
 * Refuses a shim built for another ABI (ffi/shim.h's VT_ABI_VERSION): its signatures or
 * op codes may differ from the generated bindings, and calling it would corrupt memory.
 */
export function checkAbiVersion(path: string, shimVersion: number): void {
  if (shimVersion === ABI_VERSION) return;
  throw new TorchUnavailableError(
    `the libtorch shim ${path} has ABI version ${shimVersion}, but this vagen needs ABI version ${ABI_VERSION}`,
    rebuildHint(),
  );
}

/**
 * Compares the shim's published op lists with the generated ones (both come from
 * ffi/ops.cpp, so they differ only for a shim built from other sources that kept the
 * ABI version). Op codes are indices, so any difference in a group is refused.
 */
export function checkOpTable(path: string, table: string): void {
  const native = new Map<string, string>();
  for (const group of table.split(";")) {
    const [name, list] = group.split(":");
    if (name && list !== undefined) native.set(name, list.split(",").filter(Boolean).join(","));
  }
  for (const [group, names] of Object.entries(OP_GROUPS)) {
    const found = native.get(group);
    if (found !== names.join(",")) {
      throw new TorchUnavailableError(
        `the libtorch shim ${path} numbers its ${group} ops differently from this vagen (shim: ${found ?? "no such group"}; expected: ${names.join(",")})`,
        rebuildHint(),
      );
    }
  }
}

/** What the loaded libtorch offers; loads it first. */
export function torchInfo(): TorchInfo {
  loadTorch();
  return {
    shim: loadedPath!,
    torchVersion: String(S.vt_torch_version()),
    cudaBuild: S.vt_has_cuda_build() === 1,
    cudaDevices: S.vt_cuda_device_count(),
    threads: S.vt_num_threads(),
    fusedAttention: S.vt_has_fused_sdpa() === 1,
    fusedKernels: S.vt_fused_kernels() === 1,
  };
}

/** Throws the shim's last error message when `status` is non-zero. */
export function check(status: number): void {
  if (status !== 0) throw new TorchError(String(S.vt_last_error()));
}
