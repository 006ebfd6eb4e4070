/**
 * The env registry: built-in envs by name (configs/env_registry.yaml, embedded in the
 * binary), envs registered at run time with `registerEnv`, and any env module loaded by
 * import path `path/to/file.ts:ExportName` (relative to the working directory).
 *
 * `createEnv` validates the config against the env's schema before constructing it.
 */
import { isAbsolute, resolve } from "node:path";
import { pathToFileURL } from "node:url";
import * as v from "valibot";
import { VagenError } from "../src/core/errors.ts";
import { isImportPath } from "../src/core/env-plan.ts";
import registryFile from "../configs/env_registry.yaml";
import type { Env } from "./_common/types.ts";
import { closestName, parseConfig } from "./_common/config.ts";
import { BUILTIN_MODULES } from "./builtins.ts";
import { parseResponse } from "./_common/parsers.ts";
import { closedVocabularyParser, gridRelations } from "./_common/relation-parser.ts";
import { Rng } from "../src/core/rng.ts";
import { isEnvDefinition, type EnvDefinition, type EnvKit } from "./registry-types.ts";

const ENV_KIT: EnvKit = { v, parseResponse, Rng, closedVocabularyParser, gridRelations };

export type { EnvDefinition } from "./registry-types.ts";

const registryRefs = v.parse(
  v.object({ env_registry: v.record(v.string(), v.string()) }),
  registryFile,
).env_registry;

const registered = new Map<string, EnvDefinition>();
for (const [name, ref] of Object.entries(registryRefs)) {
  const definition = BUILTIN_MODULES[ref];
  // Names whose module is not built in are loaded by import path when first created.
  if (definition) registered.set(name, { ...definition, name });
}

/** The name -> module references from configs/env_registry.yaml. */
export function registryReferences(): Record<string, string> {
  return { ...registryRefs };
}

export function registerEnv(name: string, definition: EnvDefinition): void {
  registered.set(name, { ...definition, name });
}

export function listEnvs(): EnvDefinition[] {
  return [...registered.values()];
}

export function getEnvDefinition(name: string): EnvDefinition | undefined {
  return registered.get(name);
}

/** True when `ref` is an import path (`file.ts:Export` or a path to a module file). */
export { isImportPath };

/**
 * Resolves a registered name or an import path to its definition. An import path's export
 * may be an `EnvDefinition`, or a class whose constructor takes the config object
 * (VAGEN's style); classes get no schema validation beyond being an object.
 */
/**
 * A registered name, or an import path `path/to/file.ts:ExportName` resolved against
 * `baseDir` (default: the working directory; eval passes its config file's folder).
 */
export async function resolveEnv(nameOrImportPath: string, baseDir = process.cwd()): Promise<EnvDefinition> {
  const known = registered.get(nameOrImportPath);
  if (known) return known;
  const fromYaml = registryRefs[nameOrImportPath];
  if (fromYaml) return loadFromImportPath(fromYaml, nameOrImportPath);
  if (isImportPath(nameOrImportPath)) return loadFromImportPath(nameOrImportPath, nameOrImportPath, baseDir);
  const names = [...registered.keys()];
  const suggestion = closestName(nameOrImportPath, names);
  throw new VagenError(
    `unknown env "${nameOrImportPath}"${suggestion ? ` (did you mean "${suggestion}"?)` : ""}`,
    `registered envs: ${names.join(", ")}; or give an import path like path/to/env.ts:ExportName`,
  );
}

export async function createEnv(nameOrImportPath: string, config: Record<string, unknown> = {}, baseDir?: string): Promise<Env> {
  return (await instantiateEnv(nameOrImportPath, config, baseDir)).env;
}

/** Like `createEnv`, but also returns the definition and the validated config (defaults filled in). */
export async function instantiateEnv(
  nameOrImportPath: string,
  config: Record<string, unknown> = {},
  baseDir?: string,
): Promise<{ env: Env; definition: EnvDefinition; config: Record<string, unknown> }> {
  const definition = await resolveEnv(nameOrImportPath, baseDir);
  const parsed = parseConfig(definition.configSchema, config, { subject: `env "${definition.name}"` }) as Record<string, unknown>;
  return { env: await definition.create(parsed), definition, config: parsed };
}

const looseConfig = v.record(v.string(), v.unknown());

async function loadFromImportPath(ref: string, displayName: string, baseDir = process.cwd()): Promise<EnvDefinition> {
  const colon = ref.lastIndexOf(":");
  // A Windows drive letter ("C:\...") is not an export separator.
  const hasExport = colon > 1;
  const file = hasExport ? ref.slice(0, colon) : ref;
  const exportName = hasExport ? ref.slice(colon + 1) : "default";
  const path = isAbsolute(file) ? file : resolve(baseDir, file);
  let module: Record<string, unknown>;
  try {
    module = (await import(pathToFileURL(path).href)) as Record<string, unknown>;
  } catch (err) {
    throw new VagenError(`cannot load env module "${file}" (resolved to ${path}): ${(err as Error).message}`);
  }
  const exported = module[exportName];
  if (exported === undefined) {
    const available = Object.keys(module).join(", ") || "(none)";
    throw new VagenError(`env module "${file}" has no export "${exportName}"`, `exports: ${available}`);
  }
  if (isEnvDefinition(exported)) return { ...exported, name: exported.name ?? displayName };
  const isEnvClass = typeof (exported as { prototype?: { step?: unknown } }).prototype?.step === "function";
  if (typeof exported === "function" && !isEnvClass) {
    // A factory `(kit) => definition`: the module needs no runtime imports.
    const made = await (exported as (kit: EnvKit) => unknown)(ENV_KIT);
    if (isEnvDefinition(made)) return { ...made, name: made.name ?? displayName };
    throw new VagenError(`export "${exportName}" of "${file}" is a function, but calling it with the env kit did not return an env definition`);
  }
  if (typeof exported === "function") {
    const EnvClass = exported as new (config: Record<string, unknown>) => Env;
    return {
      name: displayName,
      description: `${exportName} from ${file}`,
      configSchema: looseConfig,
      create: (config) => new EnvClass(config as Record<string, unknown>),
    };
  }
  throw new VagenError(
    `export "${exportName}" of "${file}" is neither an env definition nor an env class`,
    "export an object {name, description, configSchema, create(config)}, a factory (kit) => that object, or a class with reset/step/systemPrompt/close",
  );
}
