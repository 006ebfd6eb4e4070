/**
 * Harnesses by name, plus loading a user's own harness from a file:
 * `harness: ./my_harness.ts:MyHarness` in a config. The export may be a Harness object or
 * a factory `(options, kit) => Harness`, so a harness works without changing vagen.
 */
import { existsSync } from "node:fs";
import { isAbsolute, resolve } from "node:path";
import { pathToFileURL } from "node:url";
import { VagenError } from "../core/errors.ts";
import { didYouMean } from "../config/index.ts";
import { compactHarness } from "./compact.ts";
import { concatHarness } from "./concat.ts";
import { noConcatHarness } from "./no-concat.ts";
import { OBSERVATION_HISTORY_HARNESS, observationHistoryHarness } from "./observation-history.ts";
import { OBSERVATION_ONLY_HARNESS, observationOnlyHarness } from "./observation-only.ts";
import { summaryCompactHarness } from "./summary-compact.ts";
import { defineHarness, runAgentLoop } from "./loop.ts";
import { observationToMessage, reportedSuccess } from "./observation.ts";
import type { Harness, HarnessFactory, HarnessKit } from "./types.ts";

const KIT: HarnessKit = { defineHarness, runAgentLoop, observationToMessage, reportedSuccess };

const registry = new Map<string, HarnessFactory>([
  ["concat", () => concatHarness()],
  ["no_concat", () => noConcatHarness()],
  ["compact", (options) => compactHarness(options)],
  ["summary_compact", (options) => summaryCompactHarness(options)],
  [OBSERVATION_ONLY_HARNESS, () => observationOnlyHarness()],
  [OBSERVATION_HISTORY_HARNESS, () => observationHistoryHarness()],
]);

export function registerHarness(name: string, factory: HarnessFactory): void {
  if (registry.has(name)) throw new VagenError(`a harness named "${name}" is already registered`);
  registry.set(name, factory);
}

export function listHarnesses(): string[] {
  return [...registry.keys()];
}

/** `path/to/file.ts:ExportName` (or a path alone, meaning its default export). */
export function isImportPath(spec: string): boolean {
  return /\.(ts|tsx|js|mjs|cjs)(:[\w$]+)?$/.test(spec) || spec.startsWith(".") || spec.startsWith("/");
}

/**
 * Build a harness from a registered name or an import path. Relative import paths are
 * resolved against `baseDir` (the directory of the config that named them).
 */
export async function createHarness(spec: string, options: Record<string, unknown> = {}, baseDir = process.cwd()): Promise<Harness> {
  if (!isImportPath(spec)) {
    const factory = registry.get(spec);
    if (!factory) {
      throw new VagenError(
        `unknown harness "${spec}"${didYouMean(spec, listHarnesses())}; known: ${listHarnesses().join(", ")}`,
        "or give an import path such as ./my_harness.ts:MyHarness",
      );
    }
    // Factories declared without a parameter take no options; catch a misspelled block early.
    if (factory.length === 0 && Object.keys(options).length > 0) {
      throw new VagenError(`harness "${spec}" takes no options, got: ${Object.keys(options).join(", ")}`);
    }
    return factory(options, KIT);
  }
  return loadHarnessFromFile(spec, options, baseDir);
}

async function loadHarnessFromFile(spec: string, options: Record<string, unknown>, baseDir: string): Promise<Harness> {
  const colon = spec.lastIndexOf(":");
  // A colon only separates an export name when it follows the file name (not "C:\...").
  const hasExport = colon > 1 && /^[\w$]+$/.test(spec.slice(colon + 1));
  const file = hasExport ? spec.slice(0, colon) : spec;
  const exportName = hasExport ? spec.slice(colon + 1) : "default";
  const path = isAbsolute(file) ? file : resolve(baseDir, file);
  if (!existsSync(path)) throw new VagenError(`harness file not found: ${path} (from "${spec}")`);
  let module: Record<string, unknown>;
  try {
    module = await import(pathToFileURL(path).href);
  } catch (err) {
    throw new VagenError(`could not load harness file ${path}: ${(err as Error).message}`);
  }
  if (!(exportName in module)) {
    const exports = Object.keys(module).filter((k) => k !== "__esModule");
    throw new VagenError(`${path} has no export "${exportName}"${didYouMean(exportName, exports)}; it exports: ${exports.join(", ") || "nothing"}`);
  }
  const exported = module[exportName];
  const harness = typeof exported === "function" && !isHarness(exported) ? (exported as HarnessFactory)(options, KIT) : exported;
  if (!isHarness(harness)) {
    throw new VagenError(
      `${spec}: expected a harness (an object with name, rowPerTurn and runEpisode) or a function returning one`,
      "build one with defineHarness({name, rowPerTurn, stopOnSuccess, prompt}) from vagen's harness module",
    );
  }
  return harness;
}

function isHarness(x: unknown): x is Harness {
  const h = x as Partial<Harness> | null;
  return !!h && typeof h.name === "string" && typeof h.rowPerTurn === "boolean" && typeof h.runEpisode === "function";
}
