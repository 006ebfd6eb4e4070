/**
 * The built-in env modules, imported statically so `bun build --compile` bundles them.
 * Keys are the module references used in configs/env_registry.yaml; a test checks that
 * the two lists agree.
 */
import type { EnvDefinition } from "./registry-types.ts";
import { sokoban } from "./sokoban/index.ts";
import { frozenLake } from "./frozenlake/index.ts";
import { remoteEnv } from "./remote/index.ts";

export const BUILTIN_MODULES: Record<string, EnvDefinition> = {
  "envs/sokoban/index.ts:sokoban": sokoban as unknown as EnvDefinition,
  "envs/frozenlake/index.ts:frozenLake": frozenLake as unknown as EnvDefinition,
  "envs/remote/index.ts:remoteEnv": remoteEnv as unknown as EnvDefinition,
};
