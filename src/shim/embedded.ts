/**
 * What this vagen carries: the prebuilt shims and the shim's C++ sources. build.ts
 * writes them into build/embedded.ts (file imports, so `bun build --compile` puts them
 * in the binary); from a checkout without a build, the sources come from ffi/ and there
 * is no prebuilt shim.
 */
import { existsSync, readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { isShimSource } from "./compile.ts";
import type { ShimMeta } from "./key.ts";

export interface PrebuiltShim extends ShimMeta {
  /** Where the library is: in the binary's file system (/$bunfs/...) or in build/. */
  path: string;
}

export interface Embedded {
  prebuilt: PrebuiltShim[];
  /** ffi/ file name -> contents. */
  sources: Record<string, string>;
}

let cached: Embedded | undefined;

function fromCheckout(): Record<string, string> {
  const ffi = join(import.meta.dir, "..", "..", "ffi");
  if (!existsSync(ffi)) return {};
  return Object.fromEntries(readdirSync(ffi).filter(isShimSource).sort().map((f) => [f, readFileSync(join(ffi, f), "utf8")]));
}

export function embedded(): Embedded {
  if (cached) return cached;
  try {
    // Lazily required: the module only exists once build.ts has run.
    const gen = require("../../build/embedded.ts") as Embedded;
    cached = { prebuilt: gen.prebuilt, sources: gen.sources };
  } catch {
    cached = { prebuilt: [], sources: fromCheckout() };
  }
  return cached;
}
