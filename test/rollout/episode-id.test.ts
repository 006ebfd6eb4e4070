import { describe, expect, test } from "bun:test";
import { blake2b } from "../../src/core/blake2b.ts";
import { derivedEpisodeId, type RolloutItem } from "../../src/rollout/collect.ts";

const item = (env: string): RolloutItem => ({ env, seed: 42 });

describe("derivedEpisodeId", () => {
  test("a registered env's id is blake2b-128 of [env, seed, item index, traj index, rollout seed]", () => {
    const expected = Buffer.from(blake2b(new TextEncoder().encode(JSON.stringify(["Sokoban", 42, 3, 1, 7])), 16)).toString("hex");
    expect(derivedEpisodeId(item("Sokoban"), 3, 1, 7)).toBe(`vagen-${expected}`);
  });

  test("an env import path counts by its file's base name and export, not the folder it sits in", () => {
    const here = derivedEpisodeId(item("/home/a/project/envs/digit-env.ts:DigitEnv"), 0, 2, 7);
    expect(derivedEpisodeId(item("/tmp/clone/envs/digit-env.ts:DigitEnv"), 0, 2, 7)).toBe(here);
    expect(derivedEpisodeId(item("digit-env.ts:DigitEnv"), 0, 2, 7)).toBe(here);
    expect(derivedEpisodeId(item("/tmp/clone/envs/digit-env.ts:OtherEnv"), 0, 2, 7)).not.toBe(here);
    expect(derivedEpisodeId(item("/tmp/clone/envs/digit-env.ts:DigitEnv"), 0, 3, 7)).not.toBe(here);
  });
});
