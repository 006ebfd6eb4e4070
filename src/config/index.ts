/**
 * The config system: YAML files that compose (`defaults:` / `extends:`), Hydra-style
 * `key.path=value` overrides, and valibot schemas that say what each key must be.
 *
 *   const cfg = loadConfig("examples/eval/sokoban.yaml", ["envs.0.episodes=8"], EvalConfig);
 */
import type * as v from "valibot";
import { resolveConfig } from "./load.ts";
import { validateResolved } from "./validate.ts";

export { resolveConfig, resolveTree, isMapping, baseDirOf, resolveConfigPath, sourceOf, type ResolvedConfig, type ConfigTree, type Sources, type BaseDirs } from "./load.ts";
export { REDACTED, isSecretKey, redactSecrets, redactText, registerConfigSecrets, registerSecret } from "./redact.ts";
export { parseOverride, applyOverrides, type Override } from "./overrides.ts";
export { validate, validateResolved, configError } from "./validate.ts";
export { closest, didYouMean, editDistance } from "./suggest.ts";
export { parseKeyValues } from "./key-values.ts";

/** Read, compose, override and validate a config file in one call. */
export function loadConfig<S extends v.GenericSchema>(file: string, overrides: string[], schema: S): v.InferOutput<S> {
  return validateResolved(schema, resolveConfig(file, overrides));
}
export { registerConfigKind, configKinds, configKind, type ConfigKind } from "./kinds.ts";
