/**
 * Which way the terminal draws images: one of three inline graphics protocols, Unicode
 * half-blocks in 24-bit colour (works in any modern terminal, and over SSH and tmux), or
 * not at all. `auto` asks the environment (see detect.ts).
 */
export const IMAGE_PROTOCOLS = ["kitty", "iterm2", "sixel", "blocks", "none"] as const;
export type ImageProtocol = (typeof IMAGE_PROTOCOLS)[number];
export type ImageMode = ImageProtocol | "auto";

export function parseImageMode(value: string): ImageMode {
  if (value === "auto" || (IMAGE_PROTOCOLS as readonly string[]).includes(value)) return value as ImageMode;
  throw new Error(`--image: expected auto, ${IMAGE_PROTOCOLS.join(", ")}; got "${value}"`);
}

/**
 * Character cells an image of `width` x `height` pixels takes at `columns` cells wide:
 * a cell is about twice as tall as it is wide.
 */
export function cellSize(width: number, height: number, columns: number): { columns: number; rows: number } {
  const cols = Math.max(1, Math.floor(columns));
  return { columns: cols, rows: Math.max(1, Math.round((height / width) * cols * 0.5)) };
}
