/**
 * YAML config files that compose.
 *
 * A file may list other files under `defaults:` (Hydra's word) or `extends:`; each entry
 * is a path relative to the file (".yaml" may be left off). They are merged in order,
 * then the file itself on top, unless the list contains `_self_`, which marks where the
 * file's own keys go. Mappings merge key by key; lists and scalars replace. Every key
 * remembers which file (or override) set it, so errors can name it.
 */
import { existsSync, readFileSync } from "node:fs";
import { dirname, relative, resolve } from "node:path";
import { parseDocument } from "yaml";
import { VagenError } from "../errors.ts";
import { applyOverrides, parseOverride } from "./overrides.ts";

export type ConfigTree = Record<string, unknown>;

/** Where each key came from: dotted key path -> file path or "command line". */
export type Sources = Map<string, string>;

export interface ResolvedConfig {
  data: ConfigTree;
  sources: Sources;
  /** The top-level file, as given. */
  file: string;
}

const COMPOSE_KEYS = ["defaults", "extends"] as const;

export function isMapping(x: unknown): x is ConfigTree {
  return typeof x === "object" && x !== null && !Array.isArray(x);
}

/** Read a config file, compose what it extends, apply `key=value` overrides. */
export function resolveConfig(file: string, overrides: string[] = []): ResolvedConfig {
  const sources: Sources = new Map();
  const data = composeFile(resolve(file), [], sources);
  const parsed = overrides.map(parseOverride);
  applyOverrides(data, parsed, (path, o) => markSources(sources, path, o.kind === "set" ? o.value : undefined, `command line (${o.text})`));
  return { data, sources, file };
}

/** Like `resolveConfig` but from an in-memory tree (tests, embedded defaults). */
export function resolveTree(tree: ConfigTree, overrides: string[] = [], origin = "<built-in>"): ResolvedConfig {
  const sources: Sources = new Map();
  const data: ConfigTree = {};
  mergeInto(data, structuredClone(tree), [], sources, origin);
  applyOverrides(data, overrides.map(parseOverride), (path, o) => markSources(sources, path, o.kind === "set" ? o.value : undefined, `command line (${o.text})`));
  return { data, sources, file: origin };
}

function display(path: string): string {
  const rel = relative(process.cwd(), path);
  return rel.startsWith("..") ? path : rel;
}

function readYaml(path: string, includedFrom?: string): ConfigTree {
  if (!existsSync(path)) {
    const from = includedFrom ? ` (listed in ${display(includedFrom)})` : "";
    throw new VagenError(`config file not found: ${display(path)}${from}`);
  }
  const doc = parseDocument(readFileSync(path, "utf8"), { prettyErrors: true });
  if (doc.errors.length > 0) {
    const e = doc.errors[0]!;
    throw new VagenError(`${display(path)}: invalid YAML: ${e.message.split("\n")[0]}`);
  }
  const value = doc.toJS() ?? {};
  if (!isMapping(value)) {
    throw new VagenError(`${display(path)}: expected a mapping of keys at the top level, got ${describe(value)}`);
  }
  return value;
}

function findIncluded(entry: string, parentFile: string): string {
  const base = resolve(dirname(parentFile), entry);
  for (const candidate of [base, `${base}.yaml`, `${base}.yml`]) if (existsSync(candidate)) return candidate;
  return base;
}

function composeFile(path: string, chain: string[], sources: Sources): ConfigTree {
  if (chain.includes(path)) {
    throw new VagenError(`config files include each other in a loop: ${[...chain, path].map(display).join(" -> ")}`);
  }
  const own = readYaml(path, chain[chain.length - 1]);
  const listKey = COMPOSE_KEYS.find((k) => k in own);
  const list = listKey ? own[listKey] : [];
  for (const k of COMPOSE_KEYS) delete own[k];
  const entries = typeof list === "string" ? [list] : list;
  if (!Array.isArray(entries) || entries.some((e) => typeof e !== "string")) {
    throw new VagenError(`${display(path)}: key "${listKey}": expected a list of file paths, got ${describe(list)}`);
  }
  const order = entries.includes("_self_") ? entries : [...entries, "_self_"];
  const result: ConfigTree = {};
  for (const entry of order as string[]) {
    if (entry === "_self_") mergeInto(result, own, [], sources, display(path));
    else mergeInto(result, composeFile(findIncluded(entry, path), [...chain, path], sources), [], null, "");
  }
  return result;
}

/**
 * Deep-merge `src` into `dst`. `sources` is null when merging an already composed
 * subtree whose keys were marked when it was read.
 */
function mergeInto(dst: ConfigTree, src: ConfigTree, path: string[], sources: Sources | null, origin: string): void {
  for (const [key, value] of Object.entries(src)) {
    const p = [...path, key];
    if (isMapping(value) && isMapping(dst[key])) {
      mergeInto(dst[key] as ConfigTree, value, p, sources, origin);
    } else {
      dst[key] = value;
      if (sources) markSources(sources, p, value, origin);
    }
  }
}

function markSources(sources: Sources, path: string[], value: unknown, origin: string): void {
  const key = path.join(".");
  sources.set(key, origin);
  if (isMapping(value)) {
    for (const [k, v] of Object.entries(value)) markSources(sources, [...path, k], v, origin);
  } else {
    // A scalar or list replaced whatever subtree was here: forget its keys' origins.
    for (const existing of [...sources.keys()]) if (existing.startsWith(`${key}.`)) sources.delete(existing);
  }
}

/** The file (or override) that set `path`, looking up the nearest recorded ancestor. */
export function sourceOf(sources: Sources, path: (string | number)[]): string | undefined {
  for (let n = path.length; n > 0; n--) {
    const s = sources.get(path.slice(0, n).join("."));
    if (s) return s;
  }
  return undefined;
}

export function describe(value: unknown): string {
  if (value === undefined) return "nothing";
  if (Array.isArray(value)) return `a list ${JSON.stringify(value)}`;
  if (isMapping(value)) return "a mapping";
  return `${JSON.stringify(value)} (${value === null ? "null" : typeof value})`;
}
