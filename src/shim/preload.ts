/**
 * Opens libtorch's libraries by full path before the shim. The dynamic loader then
 * satisfies the shim's dependencies (libtorch_cpu.so, libc10.so ...) with the libraries
 * already in the process, matched by soname, so a shim built on another machine loads
 * from wherever this machine keeps its libtorch (a venv, an archive), with no
 * LD_LIBRARY_PATH and whatever rpath it was linked with.
 */
import { dlopen } from "bun:ffi";
import { ShimError } from "./errors.ts";
import { libtorchLibraries, type Libtorch } from "./libtorch.ts";

const RTLD_NOW = 2;
const RTLD_GLOBAL = 0x100;

let libc: ReturnType<typeof openLibc> | undefined;

function openLibc() {
  return dlopen("libc.so.6", {
    dlopen: { args: ["ptr", "i32"], returns: "ptr" },
    dlerror: { args: [], returns: "cstring" },
  });
}

/** Loads libtorch's libraries (kept open for the life of the process); a ShimError naming the library that failed. */
export function preloadLibtorch(lt: Libtorch): string[] {
  libc ??= openLibc();
  const paths = libtorchLibraries(lt);
  for (const path of paths) {
    // RTLD_GLOBAL, as Python's torch does for its CUDA libraries: kernels registered by
    // one library must be visible to the others.
    const handle = libc.symbols.dlopen(Buffer.from(`${path}\0`), RTLD_NOW | RTLD_GLOBAL);
    if (!handle) {
      const why = String(libc.symbols.dlerror() ?? "unknown error");
      throw new ShimError(`cannot load ${path} (torch ${lt.version} from ${lt.origin}): ${why}`, "check that this libtorch is complete (pip torch: pip install --force-reinstall torch)");
    }
  }
  return paths;
}
