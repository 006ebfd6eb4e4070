/**
 * The kitty graphics protocol: a PNG sent in base64 chunks of at most 4096 bytes inside
 * APC escapes (`ESC _ G <keys> ; <payload> ESC \`), placed at the cursor over
 * `columns` x `rows` cells. `q=2` keeps the terminal from answering on stdin, which the
 * UI reads for keys. https://sw.kovidgoyal.net/kitty/graphics-protocol/
 */
const CHUNK = 4096;

export function kittyImage(png: Uint8Array, columns: number, rows: number): string {
  const payload = Buffer.from(png).toString("base64");
  const chunks: string[] = [];
  for (let at = 0; at < payload.length; at += CHUNK) chunks.push(payload.slice(at, at + CHUNK));
  return chunks
    .map((chunk, i) => {
      const more = i < chunks.length - 1 ? 1 : 0;
      // The first chunk carries the keys; C=1 leaves the cursor where it was.
      const keys = i === 0 ? `a=T,f=100,q=2,C=1,c=${columns},r=${rows},m=${more}` : `m=${more}`;
      return `\x1b_G${keys};${chunk}\x1b\\`;
    })
    .join("");
}

/** Deletes every image kitty shows (before drawing the next frame's). */
export const KITTY_DELETE_ALL = "\x1b_Ga=d,q=2\x1b\\";
