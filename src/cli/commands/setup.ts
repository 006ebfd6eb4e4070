/**
 * `vagen setup [--force] [--json]`: the one-time work ahead of the first real command.
 * Finds libtorch, picks the shim for it and, when the binary carries no prebuilt one for
 * this libtorch, compiles it into the cache (~/.cache/vagen/shims, or $VAGEN_CACHE_DIR);
 * then loads it to prove it works. Meant for CI images and shared machines: run it once
 * while building the image, and every later `vagen` starts at once.
 */
import type { Command } from "commander";
import { chooseShim } from "../../shim/choose.ts";
import { ShimError } from "../../shim/errors.ts";
import { describe } from "../../shim/libtorch.ts";
import { cacheRoot } from "../../shim/paths.ts";
import { ABI_VERSION } from "../../torch/native-symbols.ts";
import { VagenError } from "../../core/errors.ts";

export interface SetupReport {
  libtorch: string | null;
  shim: { path: string; source: string; reason: string; key: string | null };
  cacheDir: string;
  loaded: { shim: string; torchVersion: string; cudaBuild: boolean; cudaDevices: number; fusedKernels: boolean };
}

export async function setup(force: boolean): Promise<SetupReport> {
  let choice;
  try {
    choice = chooseShim({ abiVersion: ABI_VERSION, rebuild: force, progressPrefix: "[vagen]" });
  } catch (err) {
    if (err instanceof ShimError) throw new VagenError(err.message, err.hint);
    throw err;
  }
  // Then load it, to prove it works. Loading finds what setup prepared ("cached"), or,
  // after --force with a carried shim at hand, that one.
  const torch = await import("../../torch/index.ts");
  const info = torch.torchInfo();
  return {
    libtorch: choice.libtorch ? describe(choice.libtorch) : null,
    shim: { path: choice.path, source: choice.source, reason: choice.reason, key: choice.key ?? null },
    cacheDir: cacheRoot(),
    loaded: { shim: info.shim, torchVersion: info.torchVersion, cudaBuild: info.cudaBuild, cudaDevices: info.cudaDevices, fusedKernels: info.fusedKernels },
  };
}

export function register(program: Command): void {
  program
    .command("setup")
    .description("find libtorch and prepare the shim for it (compiled once into the cache when the binary carries none for it)")
    .option("--force", "compile the shim into the cache again, even when one is there")
    .option("--json", "print the result as JSON")
    .action(async (opts: { force?: boolean; json?: boolean }) => {
      const report = await setup(opts.force === true);
      if (opts.json) {
        process.stdout.write(`${JSON.stringify(report, null, 2)}\n`);
        return;
      }
      process.stdout.write(`libtorch  ${report.libtorch ?? "(VAGEN_TORCH_SHIM: whatever the shim links)"}\n`);
      process.stdout.write(`shim      ${report.shim.source}: ${report.shim.reason}\n`);
      process.stdout.write(`ready     torch ${report.loaded.torchVersion}, ${report.loaded.cudaBuild ? `CUDA build, ${report.loaded.cudaDevices} device(s)${report.loaded.fusedKernels ? ", fused kernels" : ""}` : "CPU build"}\n`);
    });
}
