/**
 * Every path in an eval config resolves the same way: relative to the folder of the
 * config file that set the key (a `defaults:` file's keys against that file's folder),
 * and a command-line override relative to the working directory. So
 * `vagen eval /abs/path/run.yaml` means the same from any directory.
 *
 * Path-valued keys: `output_dir`, `model.model_dir`, an env's `name` and a `harness`
 * when they are import paths (`./my_env.ts:MyEnv`), and inside an env's `config` every
 * string key named `*_file`, `*_dir` or `*_path` (RemoteEnv's `url_file`, say).
 */
import { isAbsolute } from "node:path";
import { isImportPath as isEnvImportPath } from "../../envs/registry.ts";
import { type ResolvedConfig, resolveConfigPath } from "../config/index.ts";
import { isImportPath as isHarnessImportPath } from "../harness/registry.ts";
import type { EvalConfig } from "./config-schema.ts";

type Origins = Pick<ResolvedConfig, "baseDirs">;

const ENV_PATH_KEY = /_(file|dir|path)$/;

/** A copy of `config` whose relative paths are absolute, by the rule above. */
export function resolveEvalPaths(config: EvalConfig, origins: Origins): EvalConfig {
  const out: EvalConfig = structuredClone(config);
  out.output_dir = resolveConfigPath(origins, ["output_dir"], config.output_dir);
  if (out.model.backend === "engine") out.model.model_dir = resolveConfigPath(origins, ["model", "model_dir"], out.model.model_dir);
  for (const [tag, spec] of Object.entries(out.envs)) {
    const at = ["envs", tag];
    if (isEnvImportPath(spec.name)) spec.name = resolveImportPath(origins, [...at, "name"], spec.name);
    if (typeof spec.harness === "string") {
      if (isHarnessImportPath(spec.harness)) spec.harness = resolveImportPath(origins, [...at, "harness"], spec.harness);
    } else if (isHarnessImportPath(spec.harness.name)) {
      spec.harness.name = resolveImportPath(origins, [...at, "harness", "name"], spec.harness.name);
    }
    for (const [key, value] of Object.entries(spec.config)) {
      if (ENV_PATH_KEY.test(key) && typeof value === "string" && value !== "") {
        spec.config[key] = resolveConfigPath(origins, [...at, "config", key], value);
      }
    }
  }
  return out;
}

/** `file.ts:Export` with the file part made absolute; the export name is kept. */
function resolveImportPath(origins: Origins, path: string[], ref: string): string {
  const colon = ref.lastIndexOf(":");
  // A Windows drive letter ("C:\...") is not an export separator.
  const hasExport = colon > 1 && !ref.slice(colon + 1).includes("/");
  const file = hasExport ? ref.slice(0, colon) : ref;
  if (isAbsolute(file)) return ref;
  const resolved = resolveConfigPath(origins, path, file);
  return hasExport ? `${resolved}${ref.slice(colon)}` : resolved;
}
