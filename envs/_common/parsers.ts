/**
 * Response formats: how a model's raw turn text is turned into actions and fields.
 *
 * Two families, matching VAGEN's two generations:
 * - main formats (`free_think`, `no_think`, `eval_mode`): an unanchored, non-greedy regex
 *   search over the raw text; the first match wins; leading and trailing junk is allowed
 *   (except `no_think`, which must be the whole response). Contents are trimmed and
 *   actions lower-cased.
 * - main's world-model formats (`wm`, `wm_think`, and `free_wm`, now an alias of
 *   `wm_think`): `<perception><reasoning><prediction><answer>`, strict and anchored
 *   (wm-format.ts); a malformed response still yields its salvaged actions, with
 *   `format_correct: false`.
 * - the paper's (legacy) formats (`grounding`, `worldmodeling`, `grounding_worldmodeling`
 *   and their `_symbolic` / `_structured` variants): `<image>` is removed first,
 *   `format_correct` needs a strict, anchored match of the whole response, the special
 *   tokens `<think> </think> <answer> </answer>` are stripped from the contents, and
 *   truncated action lists are re-joined with `" SEP "`.
 *
 * Parsing never throws: a failed match gives `format_correct: false`, empty contents and
 * no actions. The returned object uses VAGEN's snake_case keys because it is copied into
 * `info` as is.
 */

import { canonicalWm, parseWmSections } from "./wm-format.ts";

export const MAIN_FORMATS = ["free_think", "wm", "wm_think", "free_wm", "no_think", "eval_mode"] as const;
/** Formats that carry the world-model sections (VAGEN main 2026). */
export const WM_FORMATS = ["wm", "wm_think", "free_wm"] as const;
export const PAPER_FORMATS = [
  "grounding",
  "worldmodeling",
  "grounding_worldmodeling",
  "grounding_symbolic",
  "worldmodeling_symbolic",
  "grounding_worldmodeling_symbolic",
  "grounding_structured",
  "worldmodeling_structured",
  "grounding_worldmodeling_structured",
] as const;
export const RESPONSE_FORMATS = [...MAIN_FORMATS, ...PAPER_FORMATS] as const;

export type MainFormat = (typeof MAIN_FORMATS)[number];
/** The main formats matched by one unanchored regex (everything but the wm family). */
type PlainFormat = Exclude<MainFormat, (typeof WM_FORMATS)[number]>;
export type PaperFormat = (typeof PAPER_FORMATS)[number];
export type ResponseFormat = (typeof RESPONSE_FORMATS)[number];

export interface ParsedResponse {
  llm_raw_response: string;
  /** Canonical re-serialisation; informative only (the raw text stays in the history). */
  llm_response: string;
  format_correct: boolean;
  actions: string[];
  think_content: string;
  action_content: string;
  /** The perception section (wm formats; `observation_content` keeps the same text for older readers). */
  perception_content?: string;
  observation_content?: string;
  reasoning_content?: string;
  /** wm formats: the native thinking block before the body. */
  native_thinking?: string;
  prediction_content?: string;
  [key: string]: unknown;
}

export interface ParseOptions {
  format: ResponseFormat;
  /** Literal separator between actions (`","` for Sokoban and FrozenLake). */
  actionSep: string;
  maxActions: number;
  /** Tag holding the actions: `answer` (Sokoban, FrozenLake) or `action` (Navigation). */
  answerTag?: string;
  /** Lower-case each action (main behaviour; the paper's envs compared capitalised words). */
  lowercase?: boolean;
  /** Tokens removed from contents in the paper formats. */
  specialTokens?: readonly string[];
}

const DEFAULT_SPECIAL_TOKENS = ["<think>", "</think>", "<answer>", "</answer>"] as const;

export function isResponseFormat(name: string): name is ResponseFormat {
  return (RESPONSE_FORMATS as readonly string[]).includes(name);
}

export function isWmFormat(name: string): name is (typeof WM_FORMATS)[number] {
  return (WM_FORMATS as readonly string[]).includes(name);
}

export function isPaperFormat(name: string): name is PaperFormat {
  return (PAPER_FORMATS as readonly string[]).includes(name);
}

/** The three parsers behind the nine paper format names. */
export function paperParserOf(format: PaperFormat): "grounding" | "worldmodeling" | "grounding_worldmodeling" {
  if (format.startsWith("grounding_worldmodeling")) return "grounding_worldmodeling";
  if (format.startsWith("grounding")) return "grounding";
  return "worldmodeling";
}

/** Splits an action string on a literal separator, trims, drops empties, truncates. */
export function splitActions(
  content: string,
  actionSep: string,
  maxActions: number,
  lowercase: boolean,
): { actions: string[]; truncated: boolean } {
  const all = content
    .split(actionSep)
    .map((piece) => piece.trim())
    .filter((piece) => piece.length > 0)
    .map((piece) => (lowercase ? piece.toLowerCase() : piece));
  return { actions: all.slice(0, Math.max(0, maxActions)), truncated: all.length > maxActions };
}

export function parseResponse(response: string, options: ParseOptions): ParsedResponse {
  if (isPaperFormat(options.format)) return parsePaperFormat(response, options.format, options);
  if (isWmFormat(options.format)) return parseWmFormat(response, options.format, options);
  return parseMainFormat(response, options.format as PlainFormat, options);
}

// ---------------------------------------------------------------------------------------
// main's world-model formats

function parseWmFormat(response: string, format: (typeof WM_FORMATS)[number], options: ParseOptions): ParsedResponse {
  const sections = parseWmSections(response, { allowNativeThinking: format !== "wm" });
  const split = splitActions(sections.answer, options.actionSep, options.maxActions, options.lowercase ?? true);
  const answer = split.truncated ? split.actions.join(options.actionSep) : sections.answer;
  return {
    llm_raw_response: response,
    llm_response: canonicalWm({ ...sections, answer }),
    format_correct: sections.formatCorrect,
    actions: split.actions,
    perception_content: sections.perception,
    observation_content: sections.perception,
    think_content: sections.reasoning,
    reasoning_content: sections.reasoning,
    prediction_content: sections.prediction,
    action_content: answer,
    native_thinking: sections.nativeThinking,
  };
}

// ---------------------------------------------------------------------------------------
// main formats

function tag(name: string): { open: string; close: string } {
  return { open: `<${name}>`, close: `</${name}>` };
}

/** Escapes a literal for use inside a RegExp. */
function re(literal: string): string {
  return literal.replace(/[.*+?^${}()|[\]\\/]/g, "\\$&");
}

const ANY = "([\\s\\S]*?)"; // Python's non-greedy `(.*?)` under DOTALL

function mainPattern(format: PlainFormat, answerTag: string): RegExp {
  const a = tag(answerTag);
  const answer = `${re(a.open)}${ANY}${re(a.close)}`;
  switch (format) {
    case "free_think":
      return new RegExp(`<think>${ANY}</think>\\s*${answer}`);
    case "no_think":
      return new RegExp(`^\\s*${answer}\\s*$`);
    case "eval_mode":
      return new RegExp(answer);
  }
}

const patternCache = new Map<string, RegExp>();

function cachedMainPattern(format: PlainFormat, answerTag: string): RegExp {
  const key = `${format}\u0000${answerTag}`;
  let pattern = patternCache.get(key);
  if (!pattern) {
    pattern = mainPattern(format, answerTag);
    patternCache.set(key, pattern);
  }
  return pattern;
}

function parseMainFormat(response: string, format: PlainFormat, options: ParseOptions): ParsedResponse {
  const answerTag = options.answerTag ?? "answer";
  const lowercase = options.lowercase ?? true;
  const match = cachedMainPattern(format, answerTag).exec(response);
  const group = (i: number): string => (match ? (match[i] ?? "").trim() : "");

  let think = "";
  let answer = "";
  switch (format) {
    case "free_think":
      think = group(1);
      answer = group(2);
      break;
    case "no_think":
    case "eval_mode":
      answer = group(1);
      break;
  }

  let actions: string[] = [];
  if (match) {
    const split = splitActions(answer, options.actionSep, options.maxActions, lowercase);
    actions = split.actions;
    if (split.truncated) answer = actions.join(options.actionSep);
  }

  const a = tag(answerTag);
  const answerXml = `${a.open}${answer}${a.close}`;
  const base = { llm_raw_response: response, format_correct: match !== null, actions };
  switch (format) {
    case "free_think":
      return { ...base, llm_response: `<think>${think}</think>${answerXml}`, think_content: think, action_content: answer };
    case "no_think":
    case "eval_mode":
      return { ...base, llm_response: answerXml, think_content: "", action_content: answer };
  }
}

// ---------------------------------------------------------------------------------------
// paper (legacy) formats

interface PaperShape {
  /** Inner tags of `<think>`, in order. */
  inner: readonly ("observation" | "reasoning" | "prediction")[];
}

const PAPER_SHAPES: Record<"grounding" | "worldmodeling" | "grounding_worldmodeling", PaperShape> = {
  grounding: { inner: ["observation", "reasoning"] },
  worldmodeling: { inner: ["reasoning", "prediction"] },
  grounding_worldmodeling: { inner: ["observation", "reasoning", "prediction"] },
};

function paperPatterns(shape: PaperShape, answerTag: string): { strict: RegExp; extract: RegExp } {
  const a = tag(answerTag);
  const inner = shape.inner.map((name) => `<${name}>${ANY}</${name}>`).join("\\s*");
  const body = `<think>\\s*${inner}\\s*</think>\\s*${re(a.open)}${ANY}${re(a.close)}`;
  return { strict: new RegExp(`^\\s*${body}\\s*$`), extract: new RegExp(body) };
}

function stripSpecialTokens(text: string, tokens: readonly string[]): string {
  let out = text;
  for (const token of tokens) out = out.split(token).join("").trim();
  return out;
}

function parsePaperFormat(rawResponse: string, format: PaperFormat, options: ParseOptions): ParsedResponse {
  const shape = PAPER_SHAPES[paperParserOf(format)];
  const answerTag = options.answerTag ?? "answer";
  const tokens = options.specialTokens ?? DEFAULT_SPECIAL_TOKENS;
  const response = rawResponse.split("<image>").join("");
  const { strict, extract } = paperPatterns(shape, answerTag);
  const formatCorrect = strict.exec(response.trim()) !== null;
  // Like VAGEN's legacy parsers, contents come from the unanchored extraction even when
  // the strict check fails; `format_correct` alone decides the format reward.
  const match = extract.exec(response);

  const fields: Record<string, string> = { observation: "", reasoning: "", prediction: "" };
  let answer = "";
  let think = "";
  let actions: string[] = [];
  if (match) {
    shape.inner.forEach((name, i) => (fields[name] = match[i + 1] ?? ""));
    answer = match[shape.inner.length + 1] ?? "";
    think = shape.inner.map((name) => `<${name}>${fields[name]}</${name}>`).join("");
    for (const name of shape.inner) fields[name] = stripSpecialTokens(fields[name]!, tokens);
    answer = stripSpecialTokens(answer, tokens);
    think = stripSpecialTokens(think, tokens);
    const split = splitActions(answer, options.actionSep, options.maxActions, options.lowercase ?? true);
    actions = split.actions;
    if (split.truncated) answer = actions.join(` ${options.actionSep} `);
  }

  const a = tag(answerTag);
  const parsed: ParsedResponse = {
    llm_raw_response: response,
    llm_response: `<think>${think.trim()}</think>${a.open}${answer.trim()}${a.close}`,
    format_correct: formatCorrect,
    actions,
    think_content: think,
    action_content: answer,
    reasoning_content: fields.reasoning!,
  };
  if (shape.inner.includes("observation")) parsed.observation_content = fields.observation!;
  if (shape.inner.includes("prediction")) parsed.prediction_content = fields.prediction!;
  return parsed;
}

// ---------------------------------------------------------------------------------------
// building responses (for people playing by hand, and for tests)

/**
 * A minimal well-formed response in `format` that carries `actions`; used by `vagen env
 * play` so a person can type just `up, left`.
 */
export function wrapActions(format: ResponseFormat, actions: string, answerTag = "answer"): string {
  const a = tag(answerTag);
  const answer = `${a.open}${actions}${a.close}`;
  if (isPaperFormat(format)) {
    const inner = PAPER_SHAPES[paperParserOf(format)].inner.map((name) => `<${name}>-</${name}>`).join("");
    return `<think>${inner}</think>${answer}`;
  }
  switch (format as MainFormat) {
    case "free_think":
      return `<think>-</think>${answer}`;
    case "wm":
    case "wm_think":
    case "free_wm":
      return `<perception>-</perception><reasoning>-</reasoning><prediction>-</prediction>${answer}`;
    case "no_think":
    case "eval_mode":
      return answer;
  }
  return answer;
}
