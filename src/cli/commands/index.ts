/**
 * Every top-level command. Each module exports `register(program)`, which adds one
 * command (with its subcommands) to the commander program. Keep this list in the order
 * `vagen --help` should show it.
 */
import type { Command } from "commander";
import { register as config } from "./config.ts";
import { register as demo } from "./demo.ts";
import { register as doctor } from "./doctor.ts";
import { register as env } from "./env.ts";
import { register as evaluate } from "./eval.ts";
import { register as exportModel } from "./export.ts";
import { register as generate } from "./generate.ts";
import { register as monitor } from "./monitor.ts";
import { register as serve } from "./serve.ts";
import { register as setup } from "./setup.ts";
import { register as sft } from "./sft.ts";
import { register as train } from "./train.ts";

export type RegisterCommand = (program: Command) => void;

export const commands: RegisterCommand[] = [demo, train, exportModel, sft, evaluate, monitor, generate, serve, env, config, doctor, setup];
