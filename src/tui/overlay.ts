/**
 * Graphics that Ink can't lay out. Ink renders text; a kitty / iTerm2 / sixel image is an
 * escape sequence the terminal turns into pixels over several cells. The image view keeps
 * a box of blank cells free and registers its escape here; after every frame Ink writes,
 * the overlay moves the cursor to each box (its absolute position from Ink's layout),
 * writes the image, and puts the cursor back. Only used full-screen (alternate screen),
 * where Ink's frame starts at the terminal's top-left cell.
 */
import type { DOMElement } from "ink";
import { type ImageProtocol, KITTY_DELETE_ALL } from "./image/index.ts";

interface Placed {
  node: DOMElement;
  sequence: string;
}

/** A node's top-left cell within the frame: the sum of its and its ancestors' offsets. */
export function absolutePosition(node: DOMElement): { top: number; left: number } {
  let top = 0;
  let left = 0;
  for (let n: DOMElement | undefined = node; n; n = n.parentNode) {
    if (!n.yogaNode) continue;
    top += n.yogaNode.getComputedTop();
    left += n.yogaNode.getComputedLeft();
  }
  return { top, left };
}

export class GraphicsOverlay {
  private readonly placed = new Map<string, Placed>();
  private lastWritten = "";

  constructor(
    readonly protocol: ImageProtocol,
    private readonly write: (text: string) => void,
  ) {}

  place(id: string, node: DOMElement, sequence: string): void {
    this.placed.set(id, { node, sequence });
  }

  remove(id: string): void {
    this.placed.delete(id);
  }

  /**
   * After a frame: draw every placed image. Ink rewrites changed lines only, which may
   * wipe an image's cells, so the images are drawn again after every frame; kitty keeps
   * images in a layer of their own, cleared first so moved images leave no copy behind.
   */
  afterFrame(): void {
    let out = this.protocol === "kitty" ? KITTY_DELETE_ALL : "";
    for (const { node, sequence } of this.placed.values()) {
      const { top, left } = absolutePosition(node);
      // Save the cursor, move (1-based), draw, restore.
      out += `\x1b7\x1b[${top + 1};${left + 1}H${sequence}\x1b8`;
    }
    if (out === "" || (this.placed.size === 0 && this.lastWritten === out)) return;
    this.lastWritten = out;
    this.write(out);
  }
}
