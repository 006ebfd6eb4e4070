/**
 * Env config validation: every env declares a valibot schema with its defaults inside;
 * configs are checked here so that a bad key names the env, the key, what was expected
 * and what was given.
 */
import * as v from "valibot";
import { VagenError } from "../../src/core/errors.ts";

export type ConfigSchema = v.GenericSchema<Record<string, unknown>, Record<string, unknown>>;

export interface ConfigContext {
  /** What is being configured, e.g. `env "Sokoban"`. */
  subject: string;
  /** The file the config came from, when known. */
  file?: string;
}

export function parseConfig<S extends v.GenericSchema>(
  schema: S,
  raw: unknown,
  context: ConfigContext,
): v.InferOutput<S> {
  const result = v.safeParse(schema, raw ?? {});
  if (result.success) return result.output;
  const where = context.file ? `${context.file}: ` : "";
  const lines = result.issues.map((issue) => describeIssue(issue, schema));
  throw new VagenError(
    `${where}invalid config for ${context.subject}: ${lines.join("; ")}`,
    knownKeysHint(schema),
  );
}

function describeIssue(issue: v.BaseIssue<unknown>, schema: v.GenericSchema): string {
  const path = issue.path?.map((item) => String(item.key)).join(".") ?? "";
  if (issue.type === "strict_object" && path) {
    const suggestion = closestName(path, configKeys(schema));
    return `unknown key "${path}"${suggestion ? ` (did you mean "${suggestion}"?)` : ""}`;
  }
  const received = issue.received;
  const expected = issue.expected;
  if (expected && received !== undefined) return `key "${path || "(root)"}": expected ${expected}, got ${received}`;
  return `key "${path || "(root)"}": ${issue.message}`;
}

/** Top-level keys of an object schema, in declaration order. */
export function configKeys(schema: v.GenericSchema): string[] {
  const entries = (schema as unknown as { entries?: Record<string, unknown> }).entries;
  return entries ? Object.keys(entries) : [];
}

/** Defaults of every key (`undefined` for keys without one). */
export function configDefaults(schema: v.GenericSchema): Record<string, unknown> {
  const defaults = v.getDefaults(schema as v.ObjectSchema<v.ObjectEntries, undefined>) as Record<string, unknown> | undefined;
  return defaults ?? {};
}

function knownKeysHint(schema: v.GenericSchema): string | undefined {
  const keys = configKeys(schema);
  return keys.length ? `known keys: ${keys.join(", ")}` : undefined;
}

/** The candidate closest to `name` by edit distance, if it is reasonably close. */
export function closestName(name: string, candidates: readonly string[]): string | undefined {
  let best: string | undefined;
  let bestDistance = Infinity;
  for (const candidate of candidates) {
    const d = editDistance(name.toLowerCase(), candidate.toLowerCase());
    if (d < bestDistance) {
      bestDistance = d;
      best = candidate;
    }
  }
  return best !== undefined && bestDistance <= Math.max(2, Math.floor(name.length / 3)) ? best : undefined;
}

function editDistance(a: string, b: string): number {
  const row = Array.from({ length: b.length + 1 }, (_, i) => i);
  for (let i = 1; i <= a.length; i++) {
    let diagonal = row[0]!;
    row[0] = i;
    for (let j = 1; j <= b.length; j++) {
      const above = row[j]!;
      row[j] = Math.min(row[j]! + 1, row[j - 1]! + 1, diagonal + (a[i - 1] === b[j - 1] ? 0 : 1));
      diagonal = above;
    }
  }
  return row[b.length]!;
}

// Reusable schema pieces ----------------------------------------------------------------

export const positiveInt = () => v.pipe(v.number(), v.integer(), v.minValue(1));
export const nonNegativeInt = () => v.pipe(v.number(), v.integer(), v.minValue(0));
export const probability = () => v.pipe(v.number(), v.minValue(0), v.maxValue(1));
export const nonEmptyString = () => v.pipe(v.string(), v.minLength(1));
export const renderMode = () => v.picklist(["text", "vision"]);
