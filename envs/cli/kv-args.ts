/**
 * `key=value` arguments from the command line, turned into an env config object.
 * Values: `true`/`false`, `null`, numbers, JSON lists/objects/strings (`dim_room=[7,7]`,
 * `desc=["SFF","FHF","FFG"]`, `name="x y"`), otherwise the text as is. Dotted keys nest
 * (`a.b=1` -> {a: {b: 1}}).
 */
import { VagenError } from "../../src/errors.ts";

export function parseValue(text: string): unknown {
  const trimmed = text.trim();
  if (trimmed === "true") return true;
  if (trimmed === "false") return false;
  if (trimmed === "null" || trimmed === "none" || trimmed === "None") return null;
  if (trimmed !== "" && /^[-+]?(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?$/.test(trimmed)) return Number(trimmed);
  if (/^[[{"]/.test(trimmed)) {
    try {
      return JSON.parse(trimmed);
    } catch {
      throw new VagenError(`cannot parse value ${JSON.stringify(text)} as JSON`, 'lists and objects must be valid JSON, e.g. dim_room=[7,7] or desc=["SF","FG"]');
    }
  }
  return text;
}

export function parseKeyValues(args: readonly string[]): Record<string, unknown> {
  const config: Record<string, unknown> = {};
  for (const arg of args) {
    const eq = arg.indexOf("=");
    if (eq <= 0) throw new VagenError(`expected key=value, got ${JSON.stringify(arg)}`, "example: render_mode=vision dim_room=[7,7]");
    const path = arg.slice(0, eq).split(".");
    let target = config;
    for (const key of path.slice(0, -1)) {
      const next = target[key];
      if (typeof next !== "object" || next === null || Array.isArray(next)) target[key] = {};
      target = target[key] as Record<string, unknown>;
    }
    target[path[path.length - 1]!] = parseValue(arg.slice(eq + 1));
  }
  return config;
}
