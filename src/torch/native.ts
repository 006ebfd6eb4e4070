/**
 * Loading the libtorch shim (build/libvagen_torch.so) through bun:ffi.
 *
 * Calling convention (see ffi/shim.h): every entry returns 0 on success and writes its
 * results into a Float64Array (`OUT`), one pointer-sized slot per result. Handles are
 * plain numbers. Integer-list arguments are written into `ARGS` and passed by address.
 * Both buffers are allocated once, so an op does no allocation on the TypeScript side
 * beyond its result object.
 */
import { FFIType, dlopen, ptr, type Pointer } from "bun:ffi";
import { existsSync } from "node:fs";
import { TorchError, TorchUnavailableError } from "./errors.ts";
import { OP_GROUPS, type OpCodes } from "./opcodes.ts";

const i32 = "i32" as const;
const i64 = "i64" as const;
const f64 = "f64" as const;
const p = "ptr" as const;

/** Every native entry point with its argument types. */
const SYMBOLS = {
  vt_last_error: { args: [], returns: "cstring" },
  vt_torch_version: { args: [], returns: "cstring" },
  vt_op_table: { args: [], returns: "cstring" },
  vt_abi_version: { args: [], returns: i32 },
  vt_has_cuda_build: { args: [], returns: i32 },
  vt_live_handles: { args: [], returns: FFIType.i64_fast },
  vt_num_threads: { args: [], returns: i32 },
  vt_set_num_threads: { args: [i32], returns: "void" },
  vt_free: { args: [p], returns: "void" },
  vt_meta: { args: [p, p], returns: i32 },
  vt_layout: { args: [p, p], returns: i32 },
  vt_item: { args: [p, p], returns: i32 },
  vt_from_host: { args: [p, i32, p, i32, i32, i32, i32, p], returns: i32 },
  vt_to_host: { args: [p, p, i32, i64], returns: i32 },
  vt_data_ptr: { args: [p, p], returns: i32 },
  vt_to: { args: [p, i32, i32, i32, i32, i32, p], returns: i32 },
  vt_pin_memory: { args: [p, p], returns: i32 },
  vt_is_pinned: { args: [p, p], returns: i32 },
  vt_shallow_clone: { args: [p, p], returns: i32 },
  vt_same_storage: { args: [p, p, p], returns: i32 },
  // create.cpp
  vt_fill: { args: [i32, p, i32, f64, i32, i32, i32, i32, p], returns: i32 },
  vt_fill_like: { args: [i32, p, f64, i32, i32, p], returns: i32 },
  vt_arange: { args: [f64, f64, f64, i32, i32, i32, p], returns: i32 },
  vt_linspace: { args: [f64, f64, i64, i32, i32, i32, p], returns: i32 },
  vt_eye: { args: [i64, i64, i32, i32, i32, p], returns: i32 },
  vt_random: { args: [i32, p, i32, f64, f64, p, i32, i32, i32, p], returns: i32 },
  vt_random_: { args: [i32, p, f64, f64, p], returns: i32 },
  vt_scalar_tensor: { args: [f64, i32, i32, i32, i32, p], returns: i32 },
  vt_generator_new: { args: [i32, i32, i64, p], returns: i32 },
  vt_generator_free: { args: [p], returns: "void" },
  vt_generator_seed: { args: [p, i64], returns: i32 },
  vt_generator_get_state: { args: [p, p], returns: i32 },
  vt_generator_set_state: { args: [p, p], returns: i32 },
  vt_manual_seed: { args: [i64], returns: i32 },
  vt_default_rng_state: { args: [i32, i32, p], returns: i32 },
  vt_set_default_rng_state: { args: [i32, i32, p], returns: i32 },
  // ops.cpp
  vt_unary: { args: [i32, p, p], returns: i32 },
  vt_binary: { args: [i32, p, p, f64, p], returns: i32 },
  vt_scalar: { args: [i32, p, f64, i32, p], returns: i32 },
  vt_inplace_binary: { args: [i32, p, p, f64], returns: i32 },
  vt_inplace_scalar: { args: [i32, p, f64, i32], returns: i32 },
  vt_reduce: { args: [i32, p, p, i32, i32, i32, f64, p], returns: i32 },
  vt_dim_op: { args: [i32, p, i32, i64, i32, i32, p], returns: i32 },
  vt_int_op: { args: [i32, p, i64, i64, i64, i64, p], returns: i32 },
  vt_list_op: { args: [i32, p, p, i32, p], returns: i32 },
  vt_pair_op: { args: [i32, p, i64, i64, i64, i64, p], returns: i32 },
  vt_index_op: { args: [i32, p, i64, p, p, f64, i32, p], returns: i32 },
  vt_index_inplace: { args: [i32, p, i64, p, p, f64, i32], returns: i32 },
  vt_ternary: { args: [i32, p, p, p, f64, f64, p], returns: i32 },
  vt_clamp: { args: [p, i32, f64, i32, f64, p], returns: i32 },
  vt_join: { args: [i32, p, i32, i64, p], returns: i32 },
  vt_split: { args: [i32, p, p, i32, i64, i32, p], returns: i32 },
  vt_multinomial: { args: [p, i64, i32, p, p], returns: i32 },
  vt_slices: { args: [p, p, i32, p], returns: i32 },
  // nn.cpp
  vt_linear: { args: [p, p, p, p], returns: i32 },
  vt_embedding: { args: [p, p, i64, p], returns: i32 },
  vt_layer_norm: { args: [p, p, i32, p, p, f64, p], returns: i32 },
  vt_group_norm: { args: [p, i64, p, p, f64, p], returns: i32 },
  vt_conv: { args: [p, p, p, p, p, p, i32, i64, p], returns: i32 },
  vt_dropout: { args: [p, f64, i32, p], returns: i32 },
  vt_cross_entropy: { args: [p, p, p, i32, i64, f64, p], returns: i32 },
  vt_sdpa: { args: [p, p, p, p, f64, i32, i32, f64, i32, i32, p], returns: i32 },
  vt_has_fused_sdpa: { args: [], returns: i32 },
  vt_sdp_backends: { args: [i32, i32, i32, i32, p], returns: i32 },
  vt_pad: { args: [p, p, i32, i32, f64, p], returns: i32 },
  vt_interpolate: { args: [p, i64, i64, i32, i32, p], returns: i32 },
  // fused.cpp
  vt_rms_norm: { args: [p, p, f64, p], returns: i32 },
  vt_add_rms_norm: { args: [p, p, p, f64, p], returns: i32 },
  vt_rotary: { args: [p, p, p, p, p], returns: i32 },
  vt_silu_mul: { args: [p, p, p], returns: i32 },
  vt_fused_kernels: { args: [], returns: i32 },
  vt_argmax_logprob: { args: [p, p], returns: i32 },
  vt_slot_decode_attention: { args: [p, p, p, p, p, p, p, p, i64, i64, f64, p], returns: i32 },
  vt_set_fused_kernels: { args: [i32], returns: "void" },
  // autograd.cpp
  vt_requires_grad_: { args: [p, i32], returns: i32 },
  vt_autograd_meta: { args: [p, p], returns: i32 },
  vt_retain_grad: { args: [p], returns: i32 },
  vt_grad: { args: [p, p], returns: i32 },
  vt_set_grad: { args: [p, p], returns: i32 },
  vt_backward: { args: [p, p, i32, i32], returns: i32 },
  vt_backward_many: { args: [p, p, i32, i32, i32], returns: i32 },
  vt_autograd_grad: { args: [p, p, i32, p, i32, i32, i32, p], returns: i32 },
  vt_grad_enabled: { args: [], returns: i32 },
  vt_set_grad_enabled: { args: [i32], returns: "void" },
  vt_inference_mode_enter: { args: [i32, p], returns: i32 },
  vt_inference_mode_exit: { args: [p], returns: "void" },
  vt_is_inference_mode: { args: [], returns: i32 },
  vt_is_inference: { args: [p], returns: i32 },
  vt_checkpoint_attach: { args: [i64, p, p, i32, p, i32, p], returns: i32 },
  vt_checkpoint_pop: { args: [i32, p], returns: i32 },
  vt_checkpoint_pending: { args: [], returns: FFIType.i64_fast },
  vt_checkpoint_released: { args: [i32, p], returns: i32 },
  // optim.cpp
  vt_adamw_step: { args: [p, p, p, i32, f64, f64, f64, f64, f64, f64, i32, p], returns: i32 },
  vt_sgd_step: { args: [p, p, i32, f64, f64, f64, f64, i32, i32], returns: i32 },
  vt_clip_grad_norm: { args: [p, i32, f64, f64, i32, p], returns: i32 },
  vt_has_fused_adamw: { args: [], returns: i32 },
  // io.cpp
  vt_file_map: { args: ["cstring", p], returns: i32 },
  vt_file_unmap: { args: [p, i64], returns: i32 },
  // cuda.cpp
  vt_cuda_device_count: { args: [], returns: i32 },
  vt_cuda_properties: { args: [i32, p, p, i32], returns: i32 },
  vt_cuda_synchronize: { args: [i32], returns: i32 },
  vt_cuda_memory_stats: { args: [i32, p], returns: i32 },
  vt_cuda_empty_cache: { args: [], returns: i32 },
  vt_cuda_reset_peak: { args: [i32], returns: i32 },
  vt_cuda_manual_seed_all: { args: [i64], returns: i32 },
  vt_cuda_stream_new: { args: [i32, i32, p], returns: i32 },
  vt_cuda_stream_current: { args: [i32, p], returns: i32 },
  vt_cuda_stream_set_current: { args: [p], returns: i32 },
  vt_cuda_stream_synchronize: { args: [p], returns: i32 },
  vt_cuda_stream_free: { args: [p], returns: "void" },
  vt_cuda_event_new: { args: [i32, p], returns: i32 },
  vt_cuda_event_record: { args: [p, p], returns: i32 },
  vt_cuda_event_synchronize: { args: [p], returns: i32 },
  vt_cuda_event_elapsed: { args: [p, p, p], returns: i32 },
  vt_cuda_event_query: { args: [p, p], returns: i32 },
  vt_cuda_event_free: { args: [p], returns: "void" },
  vt_cuda_graph_new: { args: [p], returns: i32 },
  vt_cuda_graph_begin: { args: [p, p], returns: i32 },
  vt_cuda_graph_end: { args: [p], returns: i32 },
  vt_cuda_graph_replay: { args: [p], returns: i32 },
  vt_cuda_graph_free: { args: [p], returns: "void" },
  vt_cudnn_flags: { args: [i32, i32, i32, p], returns: i32 },
  vt_cuda_profiler: { args: [i32], returns: i32 },
} as const;

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
/** Op codes by group and name, read from the shim at load (see ffi/ops.cpp). */
export let OPS: OpCodes = undefined as unknown as OpCodes;

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
    let lib: ReturnType<typeof open>;
    try {
      lib = open(path);
    } catch (err) {
      throw new TorchUnavailableError(
        `cannot load the libtorch shim ${path}: ${(err as Error).message}`,
        "install libtorch (apt-get install libtorch-dev) or rebuild the shim against the installed one: `bun run build`",
      );
    }
    S = lib.symbols as unknown as Shim;
    OPS = readOpTable(String(S.vt_op_table()));
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

function readOpTable(table: string): OpCodes {
  const native = new Map<string, Map<string, number>>();
  for (const group of table.split(";")) {
    if (!group) continue;
    const [name, list] = group.split(":");
    const codes = new Map<string, number>();
    list!.split(",").filter(Boolean).forEach((op, i) => codes.set(op, i));
    native.set(name!, codes);
  }
  const result: Record<string, Record<string, number>> = {};
  for (const [group, names] of Object.entries(OP_GROUPS)) {
    const codes = native.get(group);
    result[group] = {};
    for (const op of names) {
      const code = codes?.get(op);
      if (code === undefined) {
        throw new TorchUnavailableError(
          `the libtorch shim is out of date: it lacks the ${group} op "${op}"`,
          "rebuild it: `bun run build`",
        );
      }
      result[group]![op] = code;
    }
  }
  return result as OpCodes;
}
