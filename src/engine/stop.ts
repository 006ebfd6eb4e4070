/**
 * Turning generated ids into text, token by token, and deciding when to stop.
 *
 * Decoding the whole generation at every step would cost O(n^2); instead a short window
 * of recent ids is decoded (the approach of HF's TextStreamer and vLLM): text is only
 * released once it no longer ends in an incomplete UTF-8 sequence, and the window is
 * decoded together with a few earlier ids so tokenizers that drop a leading space at
 * the start of a decode still produce the right characters.
 */

/** Ids to text. The engine is given one by whoever owns the tokenizer. */
export type DecodeFn = (ids: readonly number[]) => string;

/**
 * The UTF-8 bytes one id adds to the decoded text, for byte-level BPE tokenizers where
 * decoding is exactly that concatenation (see TextTokenizer.tokenBytes).
 */
export type TokenBytesFn = (id: number) => Uint8Array;

const REPLACEMENT_CHAR = "\uFFFD";

export class IncrementalDetokenizer {
  private readonly ids: number[] = [];
  private prefixOffset = 0;
  private readOffset = 0;
  /** With token bytes: a streaming UTF-8 decoder replaces the window decodes. */
  private readonly utf8: TextDecoder | undefined;

  constructor(
    private readonly decodeIds: DecodeFn,
    private readonly tokenBytes?: TokenBytesFn,
  ) {
    // Streaming UTF-8 holds back an unfinished multi-byte character and replaces invalid
    // bytes with U+FFFD, as the tokenizer's lossy decode of the whole sequence does.
    this.utf8 = tokenBytes ? new TextDecoder("utf-8", { fatal: false, ignoreBOM: true }) : undefined;
  }

  /** Some tokenizers reject an empty id list; the empty window is simply "". */
  private decode(ids: readonly number[]): string {
    return ids.length === 0 ? "" : this.decodeIds(ids);
  }

  /** Add one id; returns the text that became final (possibly ""). */
  push(id: number): string {
    if (this.utf8) return this.utf8.decode(this.tokenBytes!(id), { stream: true });
    this.ids.push(id);
    const prefixText = this.decode(this.ids.slice(this.prefixOffset, this.readOffset));
    const fullText = this.decode(this.ids.slice(this.prefixOffset));
    if (fullText.length > prefixText.length && !fullText.endsWith(REPLACEMENT_CHAR)) {
      this.prefixOffset = this.readOffset;
      this.readOffset = this.ids.length;
      return fullText.slice(prefixText.length);
    }
    return "";
  }

  /** Whatever is still held back (an unfinished UTF-8 sequence), for the end of generation. */
  flush(): string {
    if (this.utf8) return this.utf8.decode();
    const prefixText = this.decode(this.ids.slice(this.prefixOffset, this.readOffset));
    const fullText = this.decode(this.ids.slice(this.prefixOffset));
    this.prefixOffset = this.readOffset = this.ids.length;
    return fullText.length > prefixText.length ? fullText.slice(prefixText.length) : "";
  }
}

export interface StopCheck {
  /** Text now safe to hand out (it cannot turn out to be part of a stop string). */
  released: string;
  /** The stop string that matched, if one did; the text is cut before it. */
  matched?: string;
}

/**
 * Watches the growing text for stop strings. Text that might be the start of a stop
 * string is held back until it is clear either way, so a streaming caller never sees
 * characters that the final text will not contain.
 */
export class StopStringMatcher {
  private text = "";
  private releasedLength = 0;
  private readonly longest: number;

  constructor(private readonly stops: readonly string[]) {
    this.longest = stops.reduce((m, s) => Math.max(m, s.length), 0);
  }

  /** All text accepted so far (cut before the stop string once one matched). */
  get fullText(): string {
    return this.text;
  }

  append(delta: string): StopCheck {
    if (this.stops.length === 0) {
      this.text += delta;
      this.releasedLength = this.text.length;
      return { released: delta };
    }
    // A match can start at most `longest - 1` characters before the new text.
    const searchFrom = Math.max(0, this.text.length - this.longest + 1);
    this.text += delta;
    let cut = -1;
    let matched: string | undefined;
    for (const stop of this.stops) {
      if (stop.length === 0) continue;
      const at = this.text.indexOf(stop, searchFrom);
      if (at >= 0 && (cut < 0 || at < cut)) {
        cut = at;
        matched = stop;
      }
    }
    if (matched !== undefined) {
      this.text = this.text.slice(0, cut);
      return { released: this.release(this.text.length), matched };
    }
    return { released: this.release(this.text.length - this.pendingPrefixLength()) };
  }

  /** Release everything held back (generation ended without a match). */
  finish(): string {
    return this.release(this.text.length);
  }

  private release(upTo: number): string {
    if (upTo <= this.releasedLength) return "";
    const out = this.text.slice(this.releasedLength, upTo);
    this.releasedLength = upTo;
    return out;
  }

  /** Length of the longest suffix of the text that is a proper prefix of some stop string. */
  private pendingPrefixLength(): number {
    const maxLen = Math.min(this.longest - 1, this.text.length);
    for (let len = maxLen; len > 0; len--) {
      const suffix = this.text.slice(this.text.length - len);
      if (this.stops.some((s) => s.length > len && s.startsWith(suffix))) return len;
    }
    return 0;
  }
}
