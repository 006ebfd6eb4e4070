/**
 * Lists import cycles among the project's TypeScript modules (src/, envs/), type-only
 * imports included: a cycle of types alone still ties two modules into one unit, and
 * the layers (docs/architecture.md) import one way only. Prints each cycle as a path
 * of files, each edge marked `type` when every import along it is type-only, and exits
 * 1 when there is any.
 *
 *   bun scripts/import-cycles.ts [root]
 *
 * Imports are read from the source with comments blanked out (a comment may quote an
 * import line): `import ... from "x"`, `export ... from "x"`, `import "x"` and
 * `import("x")` (also `typeof import("x")` in a type). Only relative specifiers count.
 */
import { existsSync, readdirSync, readFileSync, statSync } from "node:fs";
import { dirname, join, relative, resolve } from "node:path";

const FOLDERS = ["src", "envs"];

interface Edge {
  to: string;
  typeOnly: boolean;
}

/** The source with every comment replaced by spaces (strings, templates and regexes kept). */
export function blankComments(src: string): string {
  const out = src.split("");
  let i = 0;
  let lastSignificant = "";
  const templateDepth: number[] = [];
  let braces = 0;
  const blank = (from: number, to: number) => {
    for (let k = from; k < to; k++) if (out[k] !== "\n") out[k] = " ";
  };
  const skipString = (quote: string) => {
    i++;
    while (i < src.length && src[i] !== quote) i += src[i] === "\\" ? 2 : 1;
    i++;
  };
  const skipTemplate = () => {
    // From after a backtick or a closing `}` of `${...}` up to the next backtick or `${`.
    while (i < src.length) {
      if (src[i] === "\\") i += 2;
      else if (src[i] === "`") return void i++;
      else if (src[i] === "$" && src[i + 1] === "{") {
        templateDepth.push(braces);
        braces++;
        i += 2;
        return;
      } else i++;
    }
  };
  while (i < src.length) {
    const c = src[i]!;
    const next = src[i + 1];
    if (c === "/" && next === "/") {
      const end = src.indexOf("\n", i);
      blank(i, end < 0 ? src.length : end);
      i = end < 0 ? src.length : end;
    } else if (c === "/" && next === "*") {
      const end = src.indexOf("*/", i + 2);
      const stop = end < 0 ? src.length : end + 2;
      blank(i, stop);
      i = stop;
    } else if (c === '"' || c === "'") {
      skipString(c);
      lastSignificant = c;
    } else if (c === "`") {
      i++;
      skipTemplate();
      lastSignificant = "`";
    } else if (c === "/" && (lastSignificant === "" || "(,=:[!&|?{};+-*%<>~^".includes(lastSignificant))) {
      // A regex literal: skip to its closing slash (classes may hold a slash).
      i++;
      let inClass = false;
      while (i < src.length && (inClass || src[i] !== "/") && src[i] !== "\n") {
        if (src[i] === "\\") i++;
        else if (src[i] === "[") inClass = true;
        else if (src[i] === "]") inClass = false;
        i++;
      }
      i++;
      lastSignificant = "/";
    } else {
      if (c === "{") braces++;
      else if (c === "}") {
        braces--;
        if (templateDepth.length > 0 && templateDepth[templateDepth.length - 1] === braces) {
          templateDepth.pop();
          i++;
          skipTemplate();
          lastSignificant = "`";
          continue;
        }
      }
      if (!/\s/.test(c)) lastSignificant = c;
      i++;
    }
  }
  return out.join("");
}

const IMPORT = /\b(?:(import|export)\s+(type\s+)?(?:[\w*${}\s,]+?\s+from\s+)?|import\s*\(\s*)["']([^"']+)["']/g;

/** The relative imports of one file, resolved to files that exist. */
export function importsOf(file: string, src: string): Edge[] {
  const edges = new Map<string, boolean>();
  for (const m of blankComments(src).matchAll(IMPORT)) {
    const spec = m[3]!;
    if (!spec.startsWith(".")) continue;
    const target = resolve(dirname(file), spec);
    if (!existsSync(target)) continue;
    // `import("x")` only appears in types here (`typeof import(...)`); `import type` / `export type` are type-only.
    const typeOnly = m[1] === undefined || m[2] !== undefined;
    edges.set(target, (edges.get(target) ?? true) && typeOnly);
  }
  return [...edges].map(([to, typeOnly]) => ({ to, typeOnly }));
}

function sourceFiles(root: string): string[] {
  const files: string[] = [];
  const walk = (dir: string) => {
    for (const name of readdirSync(dir)) {
      const path = join(dir, name);
      if (statSync(path).isDirectory()) walk(path);
      else if (/\.tsx?$/.test(name)) files.push(resolve(path));
    }
  };
  for (const folder of FOLDERS) if (existsSync(join(root, folder))) walk(join(root, folder));
  return files;
}

/**
 * One cycle: `files[i]` imports `files[i + 1]` (the last imports the first), and
 * `typeOnly[i]` says whether that edge is type-only.
 */
export interface ImportCycle {
  files: string[];
  typeOnly: boolean[];
}

/** Strongly connected components of more than one file (Tarjan), each as one cycle through it. */
export function importCycles(graph: Map<string, Edge[]>): ImportCycle[] {
  let counter = 0;
  const index = new Map<string, number>();
  const low = new Map<string, number>();
  const stack: string[] = [];
  const onStack = new Set<string>();
  const components: string[][] = [];
  const visit = (v: string) => {
    index.set(v, counter);
    low.set(v, counter++);
    stack.push(v);
    onStack.add(v);
    for (const { to } of graph.get(v) ?? []) {
      if (!index.has(to)) {
        visit(to);
        low.set(v, Math.min(low.get(v)!, low.get(to)!));
      } else if (onStack.has(to)) low.set(v, Math.min(low.get(v)!, index.get(to)!));
    }
    if (low.get(v) !== index.get(v)) return;
    const component: string[] = [];
    let w: string;
    do {
      w = stack.pop()!;
      onStack.delete(w);
      component.push(w);
    } while (w !== v);
    if (component.length > 1) components.push(component);
  };
  for (const file of graph.keys()) if (!index.has(file)) visit(file);
  // One cycle per component: a shortest way back to its first file (breadth first).
  return components.map((component) => {
    const inside = new Set(component);
    const start = [...component].sort()[0]!;
    const previous = new Map<string, { from: string; typeOnly: boolean }>();
    const queue = [start];
    while (queue.length > 0) {
      const v = queue.shift()!;
      for (const { to, typeOnly } of graph.get(v) ?? []) {
        if (!inside.has(to) || previous.has(to)) continue;
        previous.set(to, { from: v, typeOnly });
        if (to === start) break;
        queue.push(to);
      }
      if (previous.has(start)) break;
    }
    // Walk the edges back from `start` to itself, then read them forwards.
    const files: string[] = [];
    const typeOnly: boolean[] = [];
    let at = start;
    do {
      const step = previous.get(at)!;
      files.unshift(step.from);
      typeOnly.unshift(step.typeOnly);
      at = step.from;
    } while (at !== start);
    return { files, typeOnly };
  });
}

if (import.meta.main) {
  const root = resolve(process.argv[2] ?? ".");
  const graph = new Map(sourceFiles(root).map((file) => [file, importsOf(file, readFileSync(file, "utf8"))]));
  const cycles = importCycles(graph);
  for (const { files, typeOnly } of cycles) {
    const parts = files.map((file, i) => `${relative(root, file)}${typeOnly[i] ? " -(type)-> " : " -> "}`);
    process.stdout.write(`${parts.join("")}${relative(root, files[0]!)}\n`);
  }
  process.stdout.write(`${cycles.length} import cycle(s) among ${graph.size} files\n`);
  process.exit(cycles.length > 0 ? 1 : 0);
}
