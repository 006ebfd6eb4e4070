/**
 * Hydra-style command-line overrides: `key.path=value`.
 *
 * The value is read as a YAML flow scalar or collection, so `lr=1e-6` is a number,
 * `cuda=true` a boolean, `ckpt=null` null, `seeds=[1,5]` a list, `name="010"` the string
 * "010", and anything else a plain string. A leading `+` (Hydra's "add a key") is accepted
 * and means the same as no prefix; `~key.path` deletes the key.
 */
import { parse as parseYaml } from "yaml";
import { VagenError } from "../core/errors.ts";

export type Override =
  | { kind: "set"; path: string[]; value: unknown; text: string }
  | { kind: "delete"; path: string[]; text: string };

const KEY_PATH = /^[A-Za-z_][\w-]*(\.[\w-]+)*$/;

export function parseOverride(text: string): Override {
  if (text.startsWith("~")) {
    const key = text.slice(1);
    if (!KEY_PATH.test(key)) throw badOverride(text, "a key path after '~', like ~trainer.ckpt");
    return { kind: "delete", path: key.split("."), text };
  }
  const eq = text.indexOf("=");
  if (eq <= 0) throw badOverride(text, "key.path=value");
  const key = text.slice(text.startsWith("+") ? 1 : 0, eq).trim();
  if (!KEY_PATH.test(key)) throw badOverride(text, "a dotted key path of letters, digits, '_' and '-'");
  return { kind: "set", path: key.split("."), value: parseValue(text.slice(eq + 1), text), text };
}

function parseValue(raw: string, text: string): unknown {
  if (raw.trim() === "") return "";
  try {
    return parseYaml(raw);
  } catch (err) {
    throw badOverride(text, `a YAML value (${(err as Error).message.split("\n")[0]})`);
  }
}

function badOverride(text: string, expected: string): VagenError {
  return new VagenError(`bad override "${text}": expected ${expected}`);
}

/** Apply overrides in order to a plain object tree (mutates and returns it). */
export function applyOverrides(
  tree: Record<string, unknown>,
  overrides: Override[],
  onSet?: (path: string[], o: Override) => void,
): Record<string, unknown> {
  for (const o of overrides) {
    let node: Record<string, unknown> = tree;
    for (const [i, key] of o.path.slice(0, -1).entries()) {
      const next = node[key];
      if (next === undefined || next === null) {
        if (o.kind === "delete") break;
        node[key] = {};
      } else if (typeof next !== "object" || Array.isArray(next)) {
        throw new VagenError(
          `override "${o.text}": "${o.path.slice(0, i + 1).join(".")}" is ${JSON.stringify(next)}, not a mapping, so it has no key "${o.path[i + 1]}"`,
        );
      }
      node = node[key] as Record<string, unknown>;
    }
    const last = o.path[o.path.length - 1]!;
    if (o.kind === "delete") delete node[last];
    else node[last] = o.value;
    onSet?.(o.path, o);
  }
  return tree;
}
