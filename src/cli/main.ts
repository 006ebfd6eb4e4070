#!/usr/bin/env bun
/**
 * The `vagen` command line. Commands live one per module in src/cli/commands/ and
 * register themselves on the program; this file only wires them and turns errors into
 * one clear line and a non-zero exit.
 */
import { Command, CommanderError } from "commander";
import { VERSION } from "../version.ts";
import { VagenError } from "../errors.ts";
import { commands } from "./commands/index.ts";

export function buildProgram(): Command {
  const program = new Command("vagen")
    .description("Multi-turn RL for vision-language-model agents, in one binary")
    .version(VERSION, "-V, --version", "print the vagen version")
    .option("--debug", "print stack traces on errors")
    .showSuggestionAfterError(true)
    .exitOverride();
  for (const register of commands) register(program);
  return program;
}

function wantsDebug(argv: string[]): boolean {
  return argv.includes("--debug") || process.env.VAGEN_DEBUG === "1";
}

export function reportError(err: unknown, debug: boolean): number {
  if (err instanceof CommanderError) {
    // commander already printed its message (unknown option, --help, --version ...)
    return err.exitCode;
  }
  if (err instanceof VagenError) {
    process.stderr.write(`error: ${err.message}\n`);
    if (err.hint) process.stderr.write(`hint: ${err.hint}\n`);
    if (debug && err.stack) process.stderr.write(`${err.stack}\n`);
    return err.exitCode;
  }
  const e = err instanceof Error ? err : new Error(String(err));
  process.stderr.write(`error: ${e.message}\n`);
  if (debug) process.stderr.write(`${e.stack ?? ""}\n`);
  else process.stderr.write("hint: run again with --debug for the stack trace\n");
  return 1;
}

export async function main(argv = process.argv): Promise<number> {
  const debug = wantsDebug(argv);
  try {
    await buildProgram().parseAsync(argv);
    return 0;
  } catch (err) {
    return reportError(err, debug);
  }
}

if (import.meta.main) {
  const code = await main();
  // Let pending stdout writes flush before leaving.
  process.exitCode = code;
}
