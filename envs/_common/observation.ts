/**
 * The observation texts shared by the grid envs (VAGEN main's `init_observation_template`
 * and `action_template`, followed by one newline).
 */

export function initialObservationText(imageOrGrid: string): string {
  return `[Initial Observation]:\n${imageOrGrid}\nDecide your next action(s).\n`;
}

export function actionObservationText(validActions: readonly string[], imageOrGrid: string): string {
  return (
    `After your answer, the extracted valid action is ${pythonListRepr(validActions)}.\n` +
    `After that, the observation is:\n${imageOrGrid}\nDecide your next action(s).\n`
  );
}

/** Python's `repr` of a list of strings, e.g. `['right', 'down']` or `[]`. */
export function pythonListRepr(items: readonly string[]): string {
  return `[${items.map(pythonStringRepr).join(", ")}]`;
}

/** Python's `repr` of a str: single quotes unless the text has `'` and no `"`. */
export function pythonStringRepr(text: string): string {
  const quote = text.includes("'") && !text.includes('"') ? '"' : "'";
  let out = quote;
  for (const ch of text) {
    const code = ch.codePointAt(0)!;
    if (ch === "\\") out += "\\\\";
    else if (ch === quote) out += `\\${quote}`;
    else if (ch === "\n") out += "\\n";
    else if (ch === "\r") out += "\\r";
    else if (ch === "\t") out += "\\t";
    else if (code < 0x20 || code === 0x7f) out += `\\x${code.toString(16).padStart(2, "0")}`;
    else out += ch;
  }
  return out + quote;
}
