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
import { VagenError } from "../core/errors.ts";
import { applyOverrides, parseOverride } from "./overrides.ts";
import { registerConfigSecrets } from "./redact.ts";

export type ConfigTree = Record<string, unknown>;

/** Where each key came from: dotted key path -> file path or "command line". */
export type Sources = Map<string, string>;

/**
 * The directory each key's relative paths resolve against: dotted key path -> the folder
 * of the file that set the key, or the working directory for command-line overrides.
 */
export type BaseDirs = Map<string, string>;

export interface ResolvedConfig {
  data: ConfigTree;
  sources: Sources;
  baseDirs: BaseDirs;
  /** The top-level file, as given. */
  file: string;
}

/** Who set a key: a label for messages, and the folder its relative paths start from. */
interface Origin {
  label: string;
  dir: string;
}

interface Origins {
  sources: Sources;
  baseDirs: BaseDirs;
}

function overrideOrigin(text: string): Origin {
  return { label: `command line (${text})`, dir: process.cwd() };
}

const COMPOSE_KEYS = ["defaults", "extends"] as const;

export function isMapping(x: unknown): x is ConfigTree {
  return typeof x === "object" && x !== null && !Array.isArray(x);
}

/** Read a config file, compose what it extends, apply `key=value` overrides. */
export function resolveConfig(file: string, overrides: string[] = []): ResolvedConfig {
  const origins: Origins = { sources: new Map(), baseDirs: new Map() };
  const data = composeFile(resolve(file), [], origins);
  const parsed = overrides.map(parseOverride);
  applyOverrides(data, parsed, (path, o) => markOrigins(origins, path, o.kind === "set" ? o.value : undefined, overrideOrigin(o.text)));
  // Before anything can quote a value in a message: its secrets are known from here on.
  registerConfigSecrets(data);
  return { data, ...origins, file };
}

/**
 * Like `resolveConfig` but from an in-memory tree (tests, embedded defaults); its
 * relative paths resolve against `baseDir`.
 */
export function resolveTree(tree: ConfigTree, overrides: string[] = [], origin = "<built-in>", baseDir = process.cwd()): ResolvedConfig {
  const origins: Origins = { sources: new Map(), baseDirs: new Map() };
  const data: ConfigTree = {};
  mergeInto(data, structuredClone(tree), [], origins, { label: origin, dir: baseDir });
  applyOverrides(data, overrides.map(parseOverride), (path, o) => markOrigins(origins, path, o.kind === "set" ? o.value : undefined, overrideOrigin(o.text)));
  registerConfigSecrets(data);
  return { data, ...origins, file: origin };
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

function composeFile(path: string, chain: string[], origins: Origins): ConfigTree {
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
    if (entry === "_self_") mergeInto(result, own, [], origins, { label: display(path), dir: dirname(path) });
    else mergeInto(result, composeFile(findIncluded(entry, path), [...chain, path], origins), [], null, undefined);
  }
  return result;
}

/**
 * Deep-merge `src` into `dst`. `origins` is null when merging an already composed
 * subtree whose keys were marked when it was read.
 */
function mergeInto(dst: ConfigTree, src: ConfigTree, path: string[], origins: Origins | null, origin: Origin | undefined): void {
  for (const [key, value] of Object.entries(src)) {
    const p = [...path, key];
    if (isMapping(value) && isMapping(dst[key])) {
      mergeInto(dst[key] as ConfigTree, value, p, origins, origin);
    } else {
      dst[key] = value;
      if (origins && origin) markOrigins(origins, p, value, origin);
    }
  }
}

function markOrigins(origins: Origins, path: string[], value: unknown, origin: Origin): void {
  const key = path.join(".");
  origins.sources.set(key, origin.label);
  origins.baseDirs.set(key, origin.dir);
  if (isMapping(value)) {
    for (const [k, v] of Object.entries(value)) markOrigins(origins, [...path, k], v, origin);
  } else {
    // A scalar or list replaced whatever subtree was here: forget its keys' origins.
    for (const map of [origins.sources, origins.baseDirs]) {
      for (const existing of [...map.keys()]) if (existing.startsWith(`${key}.`)) map.delete(existing);
    }
  }
}

/** The value recorded for `path` or its nearest recorded ancestor. */
function nearest(map: Map<string, string>, path: (string | number)[]): string | undefined {
  for (let n = path.length; n > 0; n--) {
    const s = map.get(path.slice(0, n).join("."));
    if (s) return s;
  }
  return undefined;
}

/** The file (or override) that set `path`, looking up the nearest recorded ancestor. */
export function sourceOf(sources: Sources, path: (string | number)[]): string | undefined {
  return nearest(sources, path);
}

/**
 * The folder a relative path at `path` resolves against: that of the file that set the
 * key, the working directory for a command-line override (or a key nobody set).
 */
export function baseDirOf(config: Pick<ResolvedConfig, "baseDirs">, path: (string | number)[]): string {
  return nearest(config.baseDirs, path) ?? process.cwd();
}

/**
 * A path-valued key's value made absolute by the rule above (`~` is not expanded: a
 * shell does that before vagen sees a command-line value).
 */
export function resolveConfigPath(config: Pick<ResolvedConfig, "baseDirs">, path: (string | number)[], value: string): string {
  return resolve(baseDirOf(config, path), value);
}

export function describe(value: unknown): string {
  if (value === undefined) return "nothing";
  if (Array.isArray(value)) return `a list ${JSON.stringify(value)}`;
  if (isMapping(value)) return "a mapping";
  return `${JSON.stringify(value)} (${value === null ? "null" : typeof value})`;
}
