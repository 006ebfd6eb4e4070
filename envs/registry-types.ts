/**
 * What an env module hands the registry: a name, a one-line description, a valibot
 * schema for its config (defaults inside), and a factory that receives the validated
 * config.
 */
import type * as v from "valibot";
import type { Env } from "./_common/types.ts";

export interface EnvDefinition<S extends v.GenericSchema = v.GenericSchema> {
  name: string;
  description: string;
  configSchema: S;
  /** Short notes for config keys whose default is not a plain value (shown by `vagen env list`). */
  configNotes?: Record<string, string>;
  create(config: v.InferOutput<S>): Env | Promise<Env>;
}

export function isEnvDefinition(value: unknown): value is EnvDefinition {
  return (
    typeof value === "object" &&
    value !== null &&
    typeof (value as EnvDefinition).create === "function" &&
    typeof (value as EnvDefinition).configSchema === "object"
  );
}
