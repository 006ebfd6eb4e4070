#!/usr/bin/env bun
/**
 * The `vagen` command line. Commands live one per module in src/cli/commands/ and
 * register themselves on the program; this file only wires them (and the config kinds
 * they read), turns errors into one clear line (secrets redacted) and a non-zero exit,
 * and ends quietly when the reader of its output goes away.
 */
import { Command, CommanderError } from "commander";
import { type ConfigKind, registerConfigKind } from "../config/kinds.ts";
import { redactText } from "../config/redact.ts";
import { evalConfigKind } from "../evaluation/config.ts";
import { sftConfigKind } from "../sft/config.ts";
import { trainConfigKind } from "../training/config.ts";
import { VERSION } from "../version.ts";
import { VagenError } from "../core/errors.ts";
import { commands } from "./commands/index.ts";

/**
 * Every kind of config file vagen reads, so `vagen config show` checks any of them as the
 * command that runs it would. Listed here, not registered by importing a module, so the
 * set does not depend on which modules happen to be loaded.
 */
export const CONFIG_KINDS: readonly ConfigKind[] = [evalConfigKind, trainConfigKind, sftConfigKind];

export function registerConfigKinds(kinds: readonly ConfigKind[] = CONFIG_KINDS): void {
  for (const kind of kinds) registerConfigKind(kind);
}

export function buildProgram(): Command {
  registerConfigKinds();
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
  // A message may quote a URL, an override or a server's answer: keep secrets out of it.
  const say = (text: string) => process.stderr.write(redactText(text));
  if (err instanceof VagenError) {
    say(`error: ${err.message}\n`);
    if (err.hint) say(`hint: ${err.hint}\n`);
    if (debug && err.stack) say(`${err.stack}\n`);
    return err.exitCode;
  }
  const e = err instanceof Error ? err : new Error(String(err));
  say(`error: ${e.message}\n`);
  if (debug) say(`${e.stack ?? ""}\n`);
  else say("hint: run again with --debug for the stack trace\n");
  return 1;
}

/**
 * Output into a closed pipe (`vagen env list | head -3`): stop at once and quietly, with
 * status 0, as other command-line tools do, instead of an EPIPE stack trace.
 */
export function exitQuietlyOnClosedPipe(streams: NodeJS.EventEmitter[] = [process.stdout, process.stderr], exit: (code: number) => void = process.exit): void {
  for (const stream of streams) {
    stream.on("error", (err: NodeJS.ErrnoException) => {
      if (err.code === "EPIPE") exit(0);
      else throw err;
    });
  }
}

export async function main(argv = process.argv): Promise<number> {
  const debug = wantsDebug(argv);
  try {
    await buildProgram().parseAsync(argv);
    // A command may set its own status without throwing (an interrupted run exits 130).
    return typeof process.exitCode === "number" ? process.exitCode : 0;
  } catch (err) {
    return reportError(err, debug);
  }
}

if (import.meta.main) {
  exitQuietlyOnClosedPipe();
  const code = await main();
  // Let pending stdout writes flush before leaving.
  process.exitCode = code;
}
