/**
 * `vagen env list|play|replay|render|serve`: inspect environments. The logic lives in
 * envs/ (registry, envs/cli helpers, the remote server); this module only parses
 * arguments and prints (`vagen env play`'s drawing: src/cli/render/env-play.ts).
 */
import type { Command } from "commander";
import { writeFileSync } from "node:fs";
import { VagenError } from "../../core/errors.ts";
import { configDefaults, configKeys } from "../../../envs/_common/config.ts";
import { encodePng } from "../../core/png.ts";
import { parseKeyValues } from "../../config/index.ts";
import { play } from "../../../envs/cli/play.ts";
import { readLines, replay } from "../../../envs/cli/replay.ts";
import { createEnv, instantiateEnv, listEnvs, resolveEnv } from "../../../envs/registry.ts";
import { ENV_SERVER_DEFAULTS, EnvServer } from "../../../envs/remote/server.ts";
import { integerFlag, numberFlag } from "../flags.ts";
import { envPlayRenderer } from "../render/env-play.ts";

export function register(program: Command): void {
  const env = program.command("env").description("inspect environments: list, play by hand, replay, render, serve over HTTP");

  env
    .command("list")
    .description("registered environments with their config keys and defaults")
    .option("--json", "print JSON instead of text")
    .action((options: { json?: boolean }) => {
      const envs = listEnvs().map((d) => ({
        name: d.name,
        description: d.description,
        config: Object.fromEntries(configKeys(d.configSchema).map((key) => [key, configDefaults(d.configSchema)[key] ?? null])),
        notes: d.configNotes ?? {},
      }));
      if (options.json) {
        process.stdout.write(`${JSON.stringify(envs, null, 2)}\n`);
        return;
      }
      for (const e of envs) {
        process.stdout.write(`${e.name}\n  ${e.description}\n`);
        for (const [key, value] of Object.entries(e.config)) {
          const note = e.notes[key];
          const shown = value === null ? (note ? `(${note})` : "(none)") : JSON.stringify(value);
          process.stdout.write(`    ${key} = ${shown}\n`);
        }
      }
    });

  env
    .command("play")
    .description("play an environment by hand in the terminal")
    .argument("<name>", "env name or import path (file.ts:Export)")
    .argument("[config...]", "env config as key=value")
    .option("--seed <n>", "reset seed", integerFlag("seed"), 0)
    .option("--no-color", "describe images instead of drawing them")
    .action(async (name: string, config: string[], options: { seed: number; color: boolean }) => {
      const { env: instance, config: resolved } = await instantiateEnv(name, parseKeyValues(config));
      await play({
        env: instance,
        seed: options.seed,
        promptFormat: typeof resolved.prompt_format === "string" ? resolved.prompt_format : undefined,
        onEvent: envPlayRenderer({ color: options.color }),
      });
    });

  env
    .command("replay")
    .description("reset with a seed, step through scripted responses, print JSONL events")
    .argument("<name>", "env name or import path (file.ts:Export)")
    .argument("[config...]", "env config as key=value")
    .requiredOption("--responses <file>", "one JSON string per line; - reads stdin")
    .option("--seed <n>", "reset seed", integerFlag("seed"), 0)
    .option("--images <dir>", "also save every observation image as PNG in this folder")
    .action(async (name: string, config: string[], options: { responses: string; seed: number; images?: string }) => {
      const instance = await createEnv(name, parseKeyValues(config));
      try {
        await replay({
          env: instance,
          seed: options.seed,
          lines: readLines(options.responses),
          imagesDir: options.images,
          emit: (event) => process.stdout.write(`${JSON.stringify(event)}\n`),
        });
      } finally {
        await instance.close();
      }
    });

  env
    .command("render")
    .description("save the initial observation image of a seed as PNG")
    .argument("<name>", "env name or import path (file.ts:Export)")
    .argument("[config...]", "env config as key=value")
    .requiredOption("--out <file>", "PNG file to write")
    .option("--seed <n>", "reset seed", integerFlag("seed"), 0)
    .action(async (name: string, config: string[], options: { out: string; seed: number }) => {
      const values = parseKeyValues(config);
      const definition = await resolveEnv(name);
      // Envs with a render mode draw images only in vision mode.
      if (configKeys(definition.configSchema).includes("render_mode") && values.render_mode === undefined) values.render_mode = "vision";
      const instance = await createEnv(name, values);
      try {
        const { obs } = await instance.reset(options.seed);
        const image = obs.images[0];
        if (!image) throw new VagenError(`env "${name}" returned no image for seed ${options.seed}`, "set render_mode=vision if the env has one");
        writeFileSync(options.out, encodePng(image));
        process.stdout.write(`${options.out} (${image.width}x${image.height})\n`);
      } finally {
        await instance.close();
      }
    });

  env
    .command("serve")
    .description("serve an environment over the remote-env HTTP protocol (VAGEN-compatible)")
    .argument("<name>", "env name or import path (file.ts:Export)")
    .argument("[config...]", "default env config as key=value (clients' env_config overrides it)")
    .option("--host <host>", "address to listen on", "127.0.0.1")
    .option("--port <port>", "port (0 picks a free one)", integerFlag("port", { min: 0, max: 65535 }), 8000)
    .option("--token <token>", "require this token (?token= or x-api-key); default: $VAGEN_ENV_TOKEN, then $GYM_API_KEY")
    .option("--insecure", "allow listening on a non-loopback address without a token")
    .option("--max-sessions <n>", "0 = unlimited", integerFlag("max-sessions", { min: 0 }), ENV_SERVER_DEFAULTS.maxSessions)
    .option("--session-timeout <s>", "close sessions idle this long (seconds)", numberFlag("session-timeout", { min: 0 }), ENV_SERVER_DEFAULTS.sessionTimeout)
    .option("--max-inflight <n>", "concurrent requests admitted, 0 = unlimited", integerFlag("max-inflight", { min: 0 }), ENV_SERVER_DEFAULTS.maxInflight)
    .option("--max-body-bytes <n>", "largest request body accepted", integerFlag("max-body-bytes", { min: 1 }), ENV_SERVER_DEFAULTS.maxBodyBytes)
    .action(
      async (
        name: string,
        config: string[],
        options: {
          host: string;
          port: number;
          token?: string;
          insecure?: boolean;
          maxSessions: number;
          sessionTimeout: number;
          maxInflight: number;
          maxBodyBytes: number;
        },
      ) => {
        const defaults = parseKeyValues(config);
        // Validate the defaults once up front so a typo fails now, not at the first connect.
        await (await createEnv(name, defaults)).close();
        const server = new EnvServer({
          createEnv: (envConfig) => createEnv(name, { ...defaults, ...envConfig }),
          hostname: options.host,
          port: options.port,
          token: options.token || process.env.VAGEN_ENV_TOKEN || process.env.GYM_API_KEY || undefined,
          insecure: options.insecure ?? false,
          maxSessions: options.maxSessions,
          sessionTimeout: options.sessionTimeout,
          maxInflight: options.maxInflight,
          maxBodyBytes: options.maxBodyBytes,
          log: (line) => process.stderr.write(`[env serve] ${line}\n`),
        });
        const url = server.start();
        process.stdout.write(`serving ${name} at ${url}\n`);
        await new Promise<void>((resolve) => {
          const stop = () => {
            process.off("SIGINT", stop);
            process.off("SIGTERM", stop);
            void server.stop().then(resolve);
          };
          process.on("SIGINT", stop);
          process.on("SIGTERM", stop);
        });
        // A level still being generated for a request that can no longer be answered
        // would keep the process alive until it finishes: leave now.
        process.exit(0);
      },
    );
}
