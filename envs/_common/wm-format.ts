/**
 * VAGEN main's world-model response protocol (2026-08, `response_format.py`):
 *
 *   <perception>S</perception><reasoning>R</reasoning><prediction>S'</prediction><answer>A</answer>
 *
 * matched against the whole response: anchored, whitespace only between tags and at the
 * ends, non-greedy, case-sensitive, answer last. With native thinking allowed (`wm_think`,
 * and always for the world-model reward's gate), a thinking block may come first: the
 * last `</think>` that has a `<perception>` somewhere after it is the boundary (engines
 * with a thinking budget may insert an early `</think>` of their own), and an optional
 * leading `<think>` is skipped.
 *
 * A response that is not exactly this shape is not `formatCorrect`; its sections are
 * still read loosely (legacy aliases `observation`, `think`/`thought`, `action`, or a
 * `label: value` line) so an env can salvage an action, never to earn credit.
 *
 * Both the envs (to run the answer's actions) and src/rewards (to gate and place the
 * world-model reward) parse through this one module.
 */

export const WM_SECTIONS = ["perception", "reasoning", "prediction", "answer"] as const;
export type WmSection = (typeof WM_SECTIONS)[number];

export const WM_FORMAT = "<perception>...</perception><reasoning>...</reasoning><prediction>...</prediction><answer>...</answer>";

/** Where a section's content sits in the original response: `[start, end)` in UTF-16 units. */
export interface CharSpan {
  start: number;
  end: number;
}

export interface WmSections {
  /** The whole response (after any native thinking) has exactly the canonical shape. */
  formatCorrect: boolean;
  /** Trimmed contents; loosely salvaged ones when `formatCorrect` is false. */
  perception: string;
  reasoning: string;
  prediction: string;
  answer: string;
  /** Text of the native thinking block before the body ("" when none). */
  nativeThinking: string;
  /** Untrimmed content spans of the four sections; only when `formatCorrect`. */
  spans?: Record<WmSection, CharSpan>;
}

const TAG_ALIASES: Record<WmSection, readonly string[]> = {
  perception: ["perception", "observation"],
  reasoning: ["reasoning", "think", "thought"],
  prediction: ["prediction"],
  answer: ["answer", "action"],
};

// `d` gives each group's indices, which become the section spans.
const STRICT_BODY = new RegExp(
  "^\\s*" + WM_SECTIONS.map((name) => `<${name}>([\\s\\S]*?)</${name}>`).join("\\s*") + "\\s*$",
  "d",
);

const THINK_CLOSE = "</think>";

/** Splits off a native thinking block whose last `</think>` is followed, somewhere, by `<bodyTag>`. */
export function nativeThinkingPrefix(response: string, bodyTag: string): { thinking: string; bodyOffset: number } {
  const close = response.lastIndexOf(THINK_CLOSE);
  if (close < 0 || response.indexOf(`<${bodyTag}>`, close + THINK_CLOSE.length) < 0) return { thinking: "", bodyOffset: 0 };
  const opening = /^\s*<think>/.exec(response);
  const start = opening ? opening[0].length : 0;
  return { thinking: response.slice(start, close).trim(), bodyOffset: close + THINK_CLOSE.length };
}

/** A malformed section, for salvage only: the first aliased tag, else a `label: value` line. */
export function looseSection(response: string, section: WmSection): string {
  for (const alias of TAG_ALIASES[section]) {
    const match = new RegExp(`<${alias}>([\\s\\S]*?)</${alias}>`, "i").exec(response);
    if (match) return match[1]!.trim();
  }
  for (const alias of TAG_ALIASES[section]) {
    const match = new RegExp(`^[ \\t]*${alias}[ \\t]*:[ \\t]*(.+)$`, "im").exec(response);
    if (match) return match[1]!.trim();
  }
  return "";
}

export function parseWmSections(response: string, options: { allowNativeThinking?: boolean } = {}): WmSections {
  const { thinking, bodyOffset } = options.allowNativeThinking
    ? nativeThinkingPrefix(response, "perception")
    : { thinking: "", bodyOffset: 0 };
  const match = STRICT_BODY.exec(response.slice(bodyOffset));
  if (match?.indices) {
    const spans = {} as Record<WmSection, CharSpan>;
    const text = {} as Record<WmSection, string>;
    WM_SECTIONS.forEach((name, i) => {
      const [start, end] = match.indices![i + 1]!;
      spans[name] = { start: start + bodyOffset, end: end + bodyOffset };
      text[name] = match[i + 1]!.trim();
    });
    return { formatCorrect: true, ...text, nativeThinking: thinking, spans };
  }
  return {
    formatCorrect: false,
    perception: looseSection(response, "perception"),
    reasoning: looseSection(response, "reasoning"),
    prediction: looseSection(response, "prediction"),
    answer: looseSection(response, "answer"),
    nativeThinking: thinking,
  };
}

export function canonicalWm(sections: Pick<WmSections, WmSection>): string {
  return WM_SECTIONS.map((name) => `<${name}>${sections[name]}</${name}>`).join("");
}
