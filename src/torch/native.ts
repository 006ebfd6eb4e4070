/**
 * Loading the libtorch shim through bun:ffi. Which shim (one the binary carries, one
 * compiled earlier into the cache, or one compiled now) is src/shim's choice.
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
import { chooseShim, type ShimChoice } from "../shim/choose.ts";
import { ShimError } from "../shim/errors.ts";
import { preloadLibtorch } from "../shim/preload.ts";
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

let loadedChoice: ShimChoice | undefined;
let loadFailure: TorchUnavailableError | undefined;

export interface TorchInfo {
  /** Path of the loaded shim library. */
  shim: string;
  /** Where the shim came from: carried by the binary, compiled earlier, compiled now, or VAGEN_TORCH_SHIM. */
  shimSource: ShimChoice["source"];
  /** Why that shim, in words. */
  shimReason: string;
  /** The libtorch build it is for ("torch2.11.0+cu130-cxx11-cuda13.0"); undefined for VAGEN_TORCH_SHIM. */
  shimKey?: string;
  /** Where libtorch was found ("python3", "debian" ...) and its directory; undefined for VAGEN_TORCH_SHIM. */
  libtorchOrigin?: string;
  libtorchRoot?: string;
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

/** The shim's progress lines while it is compiled on first use go to stderr with this prefix. */
const PROGRESS = "[vagen]";

/** Picks the shim (compiling it on first use), as a TorchUnavailableError when that fails. */
function choose(rebuild: boolean): ShimChoice {
  try {
    return chooseShim({ abiVersion: ABI_VERSION, rebuild, progressPrefix: PROGRESS });
  } catch (err) {
    if (err instanceof ShimError) throw new TorchUnavailableError(err.message, err.hint ?? rebuildHint());
    throw err;
  }
}

/** libtorch's own libraries, opened before the shim so that it finds them wherever they are. */
function preload(choice: ShimChoice): void {
  if (!choice.libtorch) return; // VAGEN_TORCH_SHIM: its rpath finds libtorch
  try {
    preloadLibtorch(choice.libtorch);
  } catch (err) {
    if (err instanceof ShimError) throw new TorchUnavailableError(err.message, err.hint ?? rebuildHint());
    throw err;
  }
}

/**
 * Opens the chosen shim: the ABI version first, through a table of one symbol (a stale
 * shim must be refused before its other symbols are looked up or, worse, called), then
 * the rest.
 */
function openChecked(choice: ShimChoice): ReturnType<typeof open> {
  const probe = openAbiProbe(choice.path);
  try {
    checkAbiVersion(choice.path, probe.symbols.vt_abi_version());
    try {
      return open(choice.path);
    } catch (err) {
      throw new TorchUnavailableError(`cannot load the libtorch shim ${choice.path}: ${(err as Error).message}`, rebuildHint());
    }
  } finally {
    probe.close();
  }
}

/** Loads the shim once. Throws TorchUnavailableError (with a fix-it hint) on failure. */
export function loadTorch(): Shim {
  if (loadedChoice !== undefined) return S;
  if (loadFailure) throw loadFailure;
  try {
    let choice = choose(false);
    // A libtorch that does not load is no reason to compile anything: that error stands.
    preload(choice);
    let lib: ReturnType<typeof open>;
    try {
      lib = openChecked(choice);
    } catch (err) {
      // A carried or cached shim that does not load (a stale ABI, a truncated file, a
      // libtorch that changed under it) is compiled again; one compiled just now, or
      // named by VAGEN_TORCH_SHIM, is what the user gets.
      if (!(err instanceof TorchUnavailableError) || choice.source === "override" || choice.source === "built") throw err;
      process.stderr.write(`${PROGRESS} the ${choice.source} shim ${choice.path} does not load (${err.message}); compiling it again\n`);
      choice = choose(true);
      preload(choice);
      lib = openChecked(choice);
    }
    S = lib.symbols as unknown as Shim;
    checkOpTable(choice.path, String(S.vt_op_table()));
    // cuDNN crashes inside the process on CUDA (torch 2.11 + cu130 on an H200): its
    // attention engines (bf16) and its convolutions (every dtype, from the first call)
    // call through a null function pointer, while the same calls work from Python. So
    // vagen starts with cuDNN off: SDPA uses the flash and memory-efficient kernels and
    // convolutions use libtorch's own CUDA kernels. torch.cuda.cudnn({ enabled: true })
    // and F.sdpBackends({ cudnn: true }) turn it back on. No effect on CPU builds.
    check(S.vt_sdp_backends(-1, -1, 0, -1, OUT_PTR));
    if (S.vt_has_cuda_build() === 1) check(S.vt_cudnn_flags(0, -1, -1, OUT_PTR));
    loadedChoice = choice;
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
    : "compile it again: `vagen setup --force` (in a checkout: `bun build.ts --shim-only`)";
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
    shim: loadedChoice!.path,
    shimSource: loadedChoice!.source,
    shimReason: loadedChoice!.reason,
    shimKey: loadedChoice!.key,
    libtorchOrigin: loadedChoice!.libtorch?.origin,
    libtorchRoot: loadedChoice!.libtorch?.root,
    torchVersion: String(S.vt_torch_version()),
    cudaBuild: S.vt_has_cuda_build() === 1,
    cudaDevices: S.vt_cuda_device_count(),
    threads: S.vt_num_threads(),
    fusedAttention: S.vt_has_fused_sdpa() === 1,
    fusedKernels: S.vt_fused_kernels() === 1,
  };
}

/**
 * libtorch's intra-op CPU threads for this process (`at::set_num_threads`). Small models
 * run faster on one: their matrices are too small to pay for the threads' handoffs.
 */
export function setNumThreads(threads: number): void {
  if (!Number.isInteger(threads) || threads < 1) throw new TorchError(`setNumThreads: got ${threads}, expected a positive integer`);
  loadTorch();
  check(S.vt_set_num_threads(threads));
}

/** Throws the shim's last error message when `status` is non-zero. */
export function check(status: number): void {
  if (status !== 0) throw new TorchError(String(S.vt_last_error()));
}
