/** FrozenLake: the env definition for the registry, plus the pieces others reuse. */
import type { EnvDefinition } from "../registry-types.ts";
import { frozenLakeConfigSchema } from "./config.ts";
import { FrozenLakeEnv } from "./env.ts";

export { FrozenLakeEnv } from "./env.ts";
export { FROZENLAKE_STATE_REWARD_SPEC } from "./state-reward-spec.ts";
export { generateRandomMap, isValidMap, shortestPath as shortestFrozenLakePath } from "./map.ts";
export { renderText as renderFrozenLakeText, FrozenLakeImageRenderer } from "./render.ts";

export const frozenLake: EnvDefinition<typeof frozenLakeConfigSchema> = {
  name: "FrozenLake",
  description: "Walk from start to goal without falling into a hole; random maps, optional slippery ice, text or 256x256 images",
  configSchema: frozenLakeConfigSchema,
  configNotes: {
    format_reward: "from reward_preset (main 0.02, paper 0.5)",
    success_reward: "from reward_preset (main 1.0, paper 10)",
  },
  create: (config) => new FrozenLakeEnv(config),
};
