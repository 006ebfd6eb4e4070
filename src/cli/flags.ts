/**
 * Parsers for command-line flag values, shared by the commands so every numeric flag
 * says the same thing about a bad value:
 *
 *   --max-tokens: got "0", expected an integer >= 1
 *
 * Each returns a commander argument parser `(value) => number`.
 */
import { VagenError } from "../core/errors.ts";

export interface NumberBounds {
  /** Smallest allowed value (inclusive). */
  min?: number;
  /** Largest allowed value (inclusive). */
  max?: number;
  /** Values must be above this (exclusive), for flags such as top-p in (0, 1]. */
  above?: number;
}

function describeBounds(kind: string, b: NumberBounds): string {
  const parts: string[] = [];
  if (b.above !== undefined) parts.push(`> ${b.above}`);
  if (b.min !== undefined) parts.push(`>= ${b.min}`);
  if (b.max !== undefined) parts.push(`<= ${b.max}`);
  return parts.length ? `${kind} ${parts.join(" and ")}` : kind;
}

function withinBounds(n: number, b: NumberBounds): boolean {
  return (b.min === undefined || n >= b.min) && (b.max === undefined || n <= b.max) && (b.above === undefined || n > b.above);
}

function parser(flag: string, kind: string, bounds: NumberBounds, isKind: (n: number) => boolean) {
  const expected = describeBounds(kind, bounds);
  return (value: string): number => {
    // Number("") and Number(" ") are 0: an empty value is a mistake, not zero.
    const n = value.trim() === "" ? Number.NaN : Number(value);
    if (!isKind(n) || !withinBounds(n, bounds)) throw new VagenError(`--${flag}: got ${JSON.stringify(value)}, expected ${expected}`);
    return n;
  };
}

/** An integer flag, e.g. `integerFlag("max-tokens", { min: 1 })`. */
export function integerFlag(flag: string, bounds: NumberBounds = {}): (value: string) => number {
  return parser(flag, "an integer", bounds, Number.isSafeInteger);
}

/** A finite number flag, e.g. `numberFlag("top-p", { above: 0, max: 1 })`. */
export function numberFlag(flag: string, bounds: NumberBounds = {}): (value: string) => number {
  return parser(flag, "a number", bounds, Number.isFinite);
}

/**
 * A JSON object flag, e.g. `--chat-template-kwargs '{"enable_thinking": false}'`: the
 * keyword arguments of every chat-template rendering, as transformers' apply_chat_template
 * takes them.
 */
export function jsonObjectFlag(flag: string): (value: string) => Record<string, unknown> {
  return (value: string) => {
    let parsed: unknown;
    try {
      parsed = JSON.parse(value);
    } catch {
      parsed = undefined;
    }
    if (parsed === null || typeof parsed !== "object" || Array.isArray(parsed)) {
      throw new VagenError(`--${flag}: got ${JSON.stringify(value)}, expected a JSON object such as '{"enable_thinking": false}'`);
    }
    return parsed as Record<string, unknown>;
  };
}
