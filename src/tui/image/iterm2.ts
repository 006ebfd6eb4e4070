/**
 * iTerm2's inline images (also WezTerm, VS Code's terminal, mintty): the whole PNG in one
 * OSC 1337 escape, sized in cells. https://iterm2.com/documentation-images.html
 */
export function iterm2Image(png: Uint8Array, columns: number, rows: number): string {
  const payload = Buffer.from(png).toString("base64");
  return `\x1b]1337;File=inline=1;size=${png.length};width=${columns};height=${rows};preserveAspectRatio=1:${payload}\x07`;
}
