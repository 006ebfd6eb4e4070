import { describe, expect, test } from "bun:test";
import type { RGBImage } from "../../src/core/image.ts";
import { decodePng } from "../../src/core/png.ts";
import { detectImageProtocol, drawImage, parseImageMode, resolveImageMode } from "../../src/tui/image/index.ts";
import { halfBlockLines } from "../../src/tui/image/half-blocks.ts";
import { iterm2Image } from "../../src/tui/image/iterm2.ts";
import { kittyImage } from "../../src/tui/image/kitty.ts";
import { sixelImage } from "../../src/tui/image/sixel.ts";

const image = (width: number, height: number, pixels: number[][]): RGBImage => ({ width, height, data: new Uint8Array(pixels.flat()) });

describe("half-blocks", () => {
  test("one cell holds two pixels: the upper as foreground of ▀, the lower as background", () => {
    const img = image(1, 2, [
      [1, 2, 3],
      [4, 5, 6],
    ]);
    expect(halfBlockLines(img, 1)).toEqual(["\x1b[38;2;1;2;3m\x1b[48;2;4;5;6m▀\x1b[0m"]);
  });

  test("an odd last row has the default background", () => {
    expect(halfBlockLines(image(1, 1, [[9, 9, 9]]), 1)).toEqual(["\x1b[38;2;9;9;9m\x1b[49m▀\x1b[0m"]);
  });

  test("scaled to the column budget, rows following the aspect ratio", () => {
    const big = image(8, 8, Array.from({ length: 64 }, () => [10, 20, 30]));
    const lines = halfBlockLines(big, 4);
    expect(lines).toHaveLength(2); // 4 x 4 pixels -> 2 rows of cells
    expect(lines[0]!.split("▀")).toHaveLength(5);
  });
});

describe("graphics protocols", () => {
  test("kitty: base64 PNG in chunks of 4096, keys on the first, m=1 on all but the last", () => {
    const png = new Uint8Array(4000).fill(7); // base64: 5336 characters -> 4096 + 1240
    const out = kittyImage(png, 10, 5);
    const chunks = out.split("\x1b\\").filter(Boolean);
    expect(chunks).toHaveLength(2);
    expect(chunks[0]!.startsWith("\x1b_Ga=T,f=100,q=2,C=1,c=10,r=5,m=1;")).toBe(true);
    expect(chunks[0]!.split(";")[1]!.length).toBe(4096);
    expect(chunks[1]!.startsWith("\x1b_Gm=0;")).toBe(true);
    const payload = chunks.map((c) => c.slice(c.indexOf(";") + 1)).join("");
    expect(Buffer.from(payload, "base64")).toEqual(Buffer.from(png));
  });

  test("iTerm2: one OSC 1337 with the size in cells and bytes", () => {
    const png = new Uint8Array([1, 2, 3]);
    expect(iterm2Image(png, 4, 2)).toBe("\x1b]1337;File=inline=1;size=3;width=4;height=2;preserveAspectRatio=1:AQID\x07");
  });

  test("sixel: a red and a blue pixel", () => {
    // Red quantizes to cube index 5*36 = 180, blue to 5. One band; for each colour, the
    // sixel of each column: bit 0 set where that colour is ('@' = 63 + 1), else '?' (63).
    const out = sixelImage(image(2, 1, [[255, 0, 0], [0, 0, 255]]));
    expect(out).toBe('\x1bPq"1;1;2;1#5;2;0;0;100#180;2;100;0;0#5?@$#180@?-\x1b\\');
  });

  test("sixel run-length encodes runs longer than three", () => {
    const out = sixelImage(image(5, 1, Array.from({ length: 5 }, () => [0, 0, 0])));
    expect(out).toContain("#0!5@-");
  });

  test("drawImage sizes escapes in cells and round-trips the PNG", () => {
    const img = image(4, 4, Array.from({ length: 16 }, (_, i) => [i * 10, 0, 0]));
    const drawn = drawImage(img, "kitty", 8);
    expect(drawn.kind).toBe("escape");
    expect([drawn.columns, drawn.rows]).toEqual([8, 4]);
    const seq = (drawn as { sequence: string }).sequence;
    const png = Buffer.from(seq.slice(seq.indexOf(";") + 1, seq.indexOf("\x1b\\")), "base64");
    expect(decodePng(new Uint8Array(png))).toEqual(img);
  });
});

describe("detection and the flag", () => {
  test("terminals are recognised from their environment", () => {
    expect(detectImageProtocol({ TERM: "xterm-kitty" })).toBe("kitty");
    expect(detectImageProtocol({ KITTY_WINDOW_ID: "1", TERM: "xterm-256color" })).toBe("kitty");
    expect(detectImageProtocol({ TERM_PROGRAM: "iTerm.app" })).toBe("iterm2");
    expect(detectImageProtocol({ TERM_PROGRAM: "WezTerm" })).toBe("iterm2");
    expect(detectImageProtocol({ TERM: "foot" })).toBe("sixel");
    expect(detectImageProtocol({ TERM: "xterm-256color" })).toBe("blocks");
    expect(detectImageProtocol({ TERM: "dumb" })).toBe("none");
    // tmux would need passthrough: half-blocks even inside kitty.
    expect(detectImageProtocol({ TERM: "tmux-256color", TMUX: "/tmp/tmux", KITTY_WINDOW_ID: "1" })).toBe("blocks");
  });

  test("the flag picks a protocol or defers to detection", () => {
    expect(resolveImageMode(parseImageMode("sixel"), { TERM: "xterm-kitty" })).toBe("sixel");
    expect(resolveImageMode(parseImageMode("auto"), { TERM: "xterm-kitty" })).toBe("kitty");
    expect(() => parseImageMode("png")).toThrow('--image: expected auto, kitty, iterm2, sixel, blocks, none; got "png"');
  });
});
