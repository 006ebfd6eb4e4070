/**
 * Text from a run's files made safe to put on a terminal.
 *
 * A run directory is anyone's files: a junk metrics.jsonl, a model reply or a folder name
 * may hold escape sequences that clear the screen, retitle the window, write the
 * clipboard (OSC 52) or hide text. `vagen monitor` shows such text, never obeys it:
 * control characters (C0 but newline, DEL, C1) become `\xNN`, and the bidirectional
 * overrides that reorder what a line seems to say become `\u{NNNN}`.
 */

/** C0 controls but `\n`, DEL, C1 controls; the bidi embeddings, overrides and isolates. */
const UNPRINTABLE = /[\x00-\x09\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]/g;

function escape(ch: string): string {
  const code = ch.charCodeAt(0);
  return code <= 0xff ? `\\x${code.toString(16).padStart(2, "0")}` : `\\u{${code.toString(16)}}`;
}

/** `text` with every character that would act on the terminal written out visibly. */
export function printable(text: string): string {
  return text.replace(UNPRINTABLE, escape);
}

/** `printable` for one line: a newline is written out too (`\x0a`). */
export function printableLine(text: string): string {
  return printable(text).replace(/\n/g, "\\x0a");
}
