/**
 * What an env module hands the registry: a name, a one-line description, a valibot
 * schema for its config (defaults inside), and a factory that receives the validated
 * config.
 */
import type * as v from "valibot";
import type { parseResponse } from "./_common/parsers.ts";
import type { closedVocabularyParser, gridRelations } from "./_common/relation-parser.ts";
import type { Rng } from "../src/core/rng.ts";
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

/**
 * What vagen hands an env module that exports a factory `(kit) => definition`. A module
 * loaded by import path from the single binary cannot import packages of its own unless
 * they are installed next to it; through the kit it gets valibot and vagen's helpers
 * without any runtime import.
 */
export interface EnvKit {
  /** valibot, for the config schema. */
  v: typeof v;
  /** VAGEN's response parsers (all formats), with format checking. */
  parseResponse: typeof parseResponse;
  /** The seeded generator the built-in envs use (same seed, same stream, everywhere). */
  Rng: typeof Rng;
  /** For a state reward spec: main's closed-vocabulary reader and gold relations from a grid `info.state`. */
  closedVocabularyParser: typeof closedVocabularyParser;
  gridRelations: typeof gridRelations;
}
