import { join } from "node:path";
import { describe, expect, test } from "bun:test";
import { readFileSync } from "node:fs";
import { parse } from "yaml";
import * as v from "valibot";
import { VagenError } from "../../src/core/errors.ts";
import { BUILTIN_MODULES } from "../../envs/builtins.ts";
import { createEnv, getEnvDefinition, listEnvs, registerEnv, registryReferences } from "../../envs/registry.ts";

describe("registry", () => {
  test("configs/env_registry.yaml and the bundled built-ins agree", () => {
    const yaml = parse(readFileSync("configs/env_registry.yaml", "utf8")) as { env_registry: Record<string, string> };
    expect(registryReferences()).toEqual(yaml.env_registry);
    expect(new Set(Object.values(yaml.env_registry))).toEqual(new Set(Object.keys(BUILTIN_MODULES)));
    expect(listEnvs().map((d) => d.name)).toEqual(["Sokoban", "FrozenLake", "RemoteEnv"]);
  });

  test("unknown names get a did-you-mean VagenError", async () => {
    const err = await createEnv("FrozenLak", {}).catch((e) => e);
    expect(err).toBeInstanceOf(VagenError);
    expect(err.message).toContain('did you mean "FrozenLake"');
  });

  test("bad config values name the key and the expected value", async () => {
    const err = await createEnv("FrozenLake", { size: "big" }).catch((e) => e);
    expect(err).toBeInstanceOf(VagenError);
    expect(err.message).toMatch(/key "size": expected number, got "big"/);
    const rows = await createEnv("FrozenLake", { desc: ["SF", "FX"] }).catch((e) => e);
    expect(rows.message).toMatch(/desc\.1/);
  });

  test("envs load by import path: a definition export or a class export", async () => {
    const byDefinition = await createEnv("test/envs/fixtures/counter-env.ts:counterEnv", { start: 2 });
    expect((await byDefinition.reset(3)).obs.text).toBe("count 3");
    const byClass = await createEnv("test/envs/fixtures/counter-env.ts:CounterEnv", { anything: 1 });
    expect((await byClass.step("abc")).obs.text).toBe("count 3");
    await expect(createEnv("test/envs/fixtures/counter-env.ts:nope")).rejects.toThrow(/has no export "nope"/);
    await expect(createEnv("test/envs/fixtures/missing.ts:x")).rejects.toThrow(/cannot load env module/);
    await expect(createEnv("test/envs/fixtures/counter-env.ts:counterEnv", { start: "x" })).rejects.toThrow(/start/);
  });

  test("a module can export a factory that receives the kit (valibot and parsers, no imports needed)", async () => {
    const env = await createEnv("test/envs/fixtures/kit-env.ts:counter", { target: 2 });
    await env.reset(0);
    expect((await env.step("<think>x</think><answer>inc, inc</answer>")).info.success).toBe(true);
    await expect(createEnv("test/envs/fixtures/kit-env.ts:counter", { target: "two" })).rejects.toThrow(/target/);
    await expect(createEnv("test/envs/fixtures/kit-env.ts:notAFactory")).rejects.toThrow(/did not return an env definition/);
  });

  test("import paths resolve against a base directory when one is given (eval: the config's folder)", async () => {
    const env = await createEnv("./counter-env.ts:counterEnv", { start: 5 }, join(import.meta.dir, "fixtures"));
    expect((await env.reset(1)).obs.text).toBe("count 1");
    await expect(createEnv("./counter-env.ts:counterEnv", {})).rejects.toThrow(/cannot load env module/);
  });

  test("registerEnv adds a name", async () => {
    registerEnv("Echo", {
      name: "Echo",
      description: "echoes",
      configSchema: v.strictObject({}),
      create: () => ({
        reset: async () => ({ obs: { text: "hi", images: [] }, info: {} }),
        step: async (r: string) => ({ obs: { text: r, images: [] }, reward: 0, done: true, info: {} }),
        systemPrompt: async () => ({ text: "", images: [] }),
        close: async () => {},
      }),
    });
    expect(getEnvDefinition("Echo")?.description).toBe("echoes");
    expect((await (await createEnv("Echo")).step("yo")).obs.text).toBe("yo");
  });
});
