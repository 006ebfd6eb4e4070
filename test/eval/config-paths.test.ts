/**
 * Every path in an eval config resolves against the folder of the file that set the key;
 * command-line overrides against the working directory.
 */
import { afterAll, expect, test } from "bun:test";
import { mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { baseDirOf, resolveConfig, validateResolved } from "../../src/config/index.ts";
import { EvalConfig } from "../../src/evaluation/config.ts";
import { resolveEvalPaths } from "../../src/evaluation/config-paths.ts";
import { tempDir } from "./helpers.ts";

const dir = tempDir("vagen-config-paths-");
afterAll(dir.cleanup);

function setUp(): string {
  const shared = join(dir.path, "shared");
  const runs = join(dir.path, "runs");
  mkdirSync(shared, { recursive: true });
  mkdirSync(runs, { recursive: true });
  // The included file sets the model directory and one env's harness and url_file ...
  writeFileSync(
    join(shared, "base.yaml"),
    [
      "model: {backend: engine, model_dir: ../models/tiny}",
      "envs:",
      "  remote: {name: RemoteEnv, config: {url_file: urls.txt}, episodes: 1, harness: {name: ./harness.ts:Mine, history_turns: 2}}",
    ].join("\n"),
  );
  // ... the top file sets output_dir and an env loaded by import path.
  writeFileSync(
    join(runs, "eval.yaml"),
    ["defaults: [../shared/base]", "output_dir: out", "envs:", "  custom: {name: ./my_env.ts:LineEnv, episodes: 1, harness: ./h.ts, config: {data_dir: data, mode: text}}"].join("\n"),
  );
  return join(runs, "eval.yaml");
}

test("each key resolves against the file that set it, whatever the working directory", () => {
  const file = setUp();
  const resolved = resolveConfig(file, []);
  expect(baseDirOf(resolved, ["model", "model_dir"])).toBe(join(dir.path, "shared"));
  expect(baseDirOf(resolved, ["output_dir"])).toBe(join(dir.path, "runs"));
  const config = resolveEvalPaths(validateResolved(EvalConfig, resolved), resolved);
  expect(config.output_dir).toBe(join(dir.path, "runs", "out"));
  expect(config.model).toMatchObject({ backend: "engine", model_dir: join(dir.path, "models", "tiny") });
  expect(config.envs.remote!.config.url_file).toBe(join(dir.path, "shared", "urls.txt"));
  expect(config.envs.remote!.harness).toEqual({ name: `${join(dir.path, "shared", "harness.ts")}:Mine`, history_turns: 2 });
  expect(config.envs.custom!.name).toBe(`${join(dir.path, "runs", "my_env.ts")}:LineEnv`);
  expect(config.envs.custom!.harness).toBe(join(dir.path, "runs", "h.ts"));
  expect(config.envs.custom!.config).toEqual({ data_dir: join(dir.path, "runs", "data"), mode: "text" });
  // Registered names are names, not paths.
  expect(config.envs.remote!.name).toBe("RemoteEnv");
});

test("command-line overrides resolve against the working directory; absolute paths stay", () => {
  const file = setUp();
  const resolved = resolveConfig(file, ["model.model_dir=weights/q", "output_dir=/abs/out"]);
  const config = resolveEvalPaths(validateResolved(EvalConfig, resolved), resolved);
  expect(config.model).toMatchObject({ model_dir: join(process.cwd(), "weights", "q") });
  expect(config.output_dir).toBe("/abs/out");
});
