/**
 * Validation of resolved configs with valibot, with errors a person can act on:
 * the file that set the key, the key path, the value, what was expected, and for an
 * unknown key the closest known one.
 */
import * as v from "valibot";
import { VagenError } from "../core/errors.ts";
import { describe, type ResolvedConfig, type Sources, sourceOf } from "./load.ts";
import { REDACTED, isSecretKey } from "./redact.ts";
import { didYouMean } from "./suggest.ts";

type AnySchema = v.GenericSchema | v.GenericSchemaAsync;

export interface ValidateContext {
  /** What the data came from, for messages when no per-key source is known. */
  file?: string;
  sources?: Sources;
}

export function validate<S extends v.GenericSchema>(schema: S, data: unknown, ctx: ValidateContext = {}): v.InferOutput<S> {
  const result = v.safeParse(schema, data);
  if (result.success) return result.output;
  throw configError(schema, result.issues, ctx);
}

/** Validate a resolved (composed + overridden) config. */
export function validateResolved<S extends v.GenericSchema>(schema: S, config: ResolvedConfig): v.InferOutput<S> {
  return validate(schema, config.data, { file: config.file, sources: config.sources });
}

export function configError(schema: AnySchema, issues: readonly v.BaseIssue<unknown>[], ctx: ValidateContext): VagenError {
  const lines = issues.slice(0, 8).map((issue) => describeIssue(schema, issue, ctx));
  const more = issues.length > 8 ? `\n  ... and ${issues.length - 8} more` : "";
  const head = lines.length === 1 ? lines[0]! : `invalid config:\n  ${lines.join("\n  ")}${more}`;
  return new VagenError(head);
}

function describeIssue(schema: AnySchema, issue: v.BaseIssue<unknown>, ctx: ValidateContext): string {
  const path = (issue.path ?? []).map((p) => p.key as string | number);
  const where = (ctx.sources && sourceOf(ctx.sources, path)) ?? ctx.file ?? "config";
  const keyPath = path.length ? path.join(".") : "(top level)";
  if (issue.type === "strict_object" && issue.expected === "never") {
    const known = knownKeys(schema, path.slice(0, -1));
    const key = String(path[path.length - 1]);
    const list = known.length ? `; known keys here: ${known.join(", ")}` : "";
    return `${where}: unknown key "${keyPath}"${didYouMean(key, known)}${list}`;
  }
  if (issue.input === undefined && issue.kind === "schema") {
    // A missing key: valibot reports the key name as "expected"; say what the value should be.
    const expects = (schemaAt(schema, path) as { expects?: string } | undefined)?.expects ?? issue.expected;
    return `${where}: key "${keyPath}": got nothing (the key is missing), expected ${expects}`;
  }
  // Validations without an "expected" (custom checks) carry their meaning in the message.
  const expected = issue.expected ?? (issue.kind === "validation" ? issue.message : issue.type);
  const last = path[path.length - 1];
  const got = typeof last === "string" && isSecretKey(last) ? REDACTED : describe(issue.input);
  return `${where}: key "${keyPath}": got ${got}, expected ${expected}`;
}

/** The sub-schema at `path`, following object entries, array items and record values. */
function schemaAt(schema: AnySchema, path: (string | number)[]): unknown {
  let node: unknown = schema;
  for (const key of path) {
    node = unwrap(node);
    const n = node as { type?: string; entries?: Record<string, unknown>; item?: unknown; value?: unknown };
    if (n.entries && typeof key === "string" && key in n.entries) node = n.entries[key];
    else if (n.item && typeof key === "number") node = n.item;
    else if (n.value && n.type === "record") node = n.value;
    else return undefined;
  }
  return node;
}

/** Keys an object schema accepts at `path` (empty if it can't tell). */
function knownKeys(schema: AnySchema, path: (string | number)[]): string[] {
  const node = schemaAt(schema, path);
  const entries = node ? (unwrap(node) as { entries?: Record<string, unknown> }).entries : undefined;
  return entries ? Object.keys(entries) : [];
}

function unwrap(node: unknown): unknown {
  let n = node as { type?: string; wrapped?: unknown; pipe?: unknown[] };
  for (let i = 0; i < 10; i++) {
    if (n.wrapped) n = n.wrapped as typeof n;
    else if (n.pipe && n.pipe[0] !== n) n = n.pipe[0] as typeof n;
    else break;
  }
  return n;
}
