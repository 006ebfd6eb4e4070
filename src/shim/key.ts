/**
 * What makes two shims interchangeable: the libtorch build they link against (version,
 * C++ ABI, CUDA flavour). A shim is only ever loaded into a libtorch with its key.
 */
import type { Libtorch } from "./libtorch.ts";

/** "torch1.13.0-cxx11-cpu", "torch2.11.0+cu130-cxx11-cuda13.0": safe as a folder name. */
export function shimKey(lt: Pick<Libtorch, "version" | "cxx11Abi" | "cuda">): string {
  const key = `torch${lt.version}-${lt.cxx11Abi ? "cxx11" : "precxx11"}-${lt.cuda ? `cuda${lt.cuda}` : "cpu"}`;
  return key.replace(/[^A-Za-z0-9.+_-]/g, "_");
}

/** What a built shim records next to itself (meta.json), and a binary records of the shims it carries. */
export interface ShimMeta {
  key: string;
  /** VT_ABI_VERSION of the sources it was built from. */
  abiVersion: number;
  /** Hash of the ffi/ sources it was built from. */
  sourcesHash: string;
  /** Hash of the sources and every compiler and linker flag. */
  buildHash: string;
  /** Whether vagen's fused CUDA kernels are in it. */
  fusedKernels: boolean;
  libtorch: { version: string; cxx11Abi: boolean; cuda: string | null; origin: string };
}

/** Reads a meta.json; undefined when it is missing a field (then the shim is not trusted). */
export function parseShimMeta(text: string): ShimMeta | undefined {
  try {
    const m = JSON.parse(text) as Partial<ShimMeta>;
    const ok =
      typeof m.key === "string" &&
      typeof m.abiVersion === "number" &&
      typeof m.sourcesHash === "string" &&
      typeof m.buildHash === "string" &&
      typeof m.fusedKernels === "boolean" &&
      typeof m.libtorch?.version === "string";
    return ok ? (m as ShimMeta) : undefined;
  } catch {
    return undefined;
  }
}
