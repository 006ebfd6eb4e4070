/**
 * Where a section's score goes in the response's tokens.
 *
 * Token k covers the characters [end(k-1), end(k)) of the decoded response, where end(k)
 * is the length of the first k+1 tokens decoded together (main's `spans.py`: no
 * re-encoding, so the ids are the sampled ones). A section's score goes on the last token
 * that overlaps its character span, boundary tokens included (`section_end`, main's
 * default), or on the turn's last token (`turn_end`).
 */
import type { CharSpan } from "../../envs/_common/wm-format.ts";

/** end(k) for every token, from each token's own decoded text. */
export function tokenEndsFromPieces(pieces: readonly string[]): number[] {
  const ends: number[] = [];
  let end = 0;
  for (const piece of pieces) {
    end += piece.length;
    ends.push(end);
  }
  return ends;
}

/**
 * end(k) by decoding every prefix, as main does; right where a multi-byte character is
 * split over tokens (a piece alone decodes to a replacement character). O(n) decodes.
 */
export function tokenEndsByPrefixDecode(ids: readonly number[], decode: (ids: number[]) => string): number[] {
  return ids.map((_, k) => decode(ids.slice(0, k + 1)).length);
}

/**
 * end(k) in one pass, from each id's UTF-8 bytes (`Tokenizer.tokenBytes()` for
 * byte-level BPE): a streaming decoder holds a character split over tokens until its
 * last byte, so the character counts at the token that completes it (where prefix
 * decoding would count a replacement character one token early).
 */
export function tokenEndsFromBytes(ids: readonly number[], bytesOf: (id: number) => Uint8Array): number[] {
  const decoder = new TextDecoder("utf-8");
  const ends: number[] = [];
  let end = 0;
  for (const id of ids) {
    end += decoder.decode(bytesOf(id), { stream: true }).length;
    ends.push(end);
  }
  return ends;
}

/** Index of the last token overlapping `span`; an empty span uses the token holding its position. Null without tokens. */
export function lastTokenOverlapping(span: CharSpan, tokenEnds: readonly number[]): number | null {
  if (tokenEnds.length === 0) return null;
  let last: number | null = null;
  for (let k = 0; k < tokenEnds.length; k++) {
    const start = k === 0 ? 0 : tokenEnds[k - 1]!;
    const end = tokenEnds[k]!;
    const overlaps = span.end > span.start ? start < span.end && end > span.start : start <= span.start && span.start < end;
    if (overlaps) last = k;
    if (start >= Math.max(span.end, span.start + 1)) break;
  }
  return last ?? tokenEnds.length - 1;
}

export type CreditSite = "section_end" | "turn_end";

/** The token a section's score goes on, or null for a response without tokens. */
export function creditPosition(site: CreditSite, span: CharSpan, tokenEnds: readonly number[]): number | null {
  if (tokenEnds.length === 0) return null;
  return site === "turn_end" ? tokenEnds.length - 1 : lastTokenOverlapping(span, tokenEnds);
}
