/**
 * Learning curves as a PNG: held-out success (`val/<env>/success_rate` in each run's
 * metrics.jsonl) against the RL step, one polyline per run, coloured by group.
 *
 *   bun bench/demo/plot-curves.ts OUT.png answer=runs/a-s0,runs/a-s1 free_think=runs/f-s0 ...
 *   bun bench/demo/plot-curves.ts --metric train/sokoban/success_rate --smooth 10 OUT.png ...
 *
 * `--metric` plots another key of metrics.jsonl (every step that has it), `--smooth N` its
 * mean over the last N points.
 * Each argument after the output is GROUP=RUN_DIR[,RUN_DIR...] (a run directory holding
 * metrics.jsonl, or a metrics .jsonl file). Axes: steps from 0 to the last validation,
 * gridlines every quarter, labelled; success 0 to 1, gridlines every 0.2, labelled. The
 * groups take the colours of GROUP_COLOURS in order; the caption that says which group is
 * which goes beside the image (the plot itself draws digits only).
 */
import { existsSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { parseArgs } from "node:util";
import { PNG } from "pngjs";

type Rgb = readonly [number, number, number];
const GROUP_COLOURS: Rgb[] = [
  [31, 119, 180], // blue
  [255, 127, 14], // orange
  [44, 160, 44], // green
  [214, 39, 40], // red
  [148, 103, 189], // purple
];
const WIDTH = 640;
const HEIGHT = 400;
const MARGIN = { left: 48, right: 16, top: 16, bottom: 32 };

/** 3 x 5 digits and a point, row by row (1 = ink). */
const GLYPHS: Record<string, string[]> = {
  "0": ["111", "101", "101", "101", "111"],
  "1": ["010", "110", "010", "010", "111"],
  "2": ["111", "001", "111", "100", "111"],
  "3": ["111", "001", "111", "001", "111"],
  "4": ["101", "101", "111", "001", "001"],
  "5": ["111", "100", "111", "001", "111"],
  "6": ["111", "100", "111", "101", "111"],
  "7": ["111", "001", "010", "010", "010"],
  "8": ["111", "101", "111", "101", "111"],
  "9": ["111", "101", "111", "001", "111"],
  ".": ["000", "000", "000", "000", "010"],
};

const { values: flags, positionals } = parseArgs({ allowPositionals: true, options: { metric: { type: "string" }, smooth: { type: "string", default: "1" } } });
const smooth = Math.max(1, Number(flags.smooth));

/** The points of one run: [step, value] of `--metric`, or of the held-out success rate. */
function validations(path: string): [number, number][] {
  const file = existsSync(join(path, "metrics.jsonl")) ? join(path, "metrics.jsonl") : path;
  const points: [number, number][] = [];
  for (const line of readFileSync(file, "utf8").split("\n")) {
    if (!line.trim()) continue;
    const row = JSON.parse(line) as Record<string, number>;
    const key = flags.metric ?? Object.keys(row).find((k) => k.startsWith("val/") && k.endsWith("/success_rate"));
    if (key !== undefined && row[key] !== undefined) points.push([row.step!, row[key]!]);
  }
  return points.map(([step], i) => {
    const window = points.slice(Math.max(0, i - smooth + 1), i + 1);
    return [step, window.reduce((a, [, y]) => a + y, 0) / window.length];
  });
}

class Canvas {
  readonly png = new PNG({ width: WIDTH, height: HEIGHT });
  constructor() {
    this.png.data.fill(255);
  }
  set(x: number, y: number, [r, g, b]: Rgb): void {
    x = Math.round(x);
    y = Math.round(y);
    if (x < 0 || y < 0 || x >= WIDTH || y >= HEIGHT) return;
    const i = (y * WIDTH + x) * 4;
    this.png.data[i] = r;
    this.png.data[i + 1] = g;
    this.png.data[i + 2] = b;
    this.png.data[i + 3] = 255;
  }
  /** A line `width` pixels thick (Bresenham-free: small steps along the segment). */
  line(x0: number, y0: number, x1: number, y1: number, colour: Rgb, width = 1): void {
    const n = Math.max(1, Math.ceil(Math.hypot(x1 - x0, y1 - y0) * 2));
    const half = Math.floor(width / 2);
    for (let k = 0; k <= n; k++) {
      const x = x0 + ((x1 - x0) * k) / n;
      const y = y0 + ((y1 - y0) * k) / n;
      for (let dx = -half; dx <= half; dx++) for (let dy = -half; dy <= half; dy++) this.set(x + dx, y + dy, colour);
    }
  }
  dot(x: number, y: number, colour: Rgb): void {
    for (let dx = -2; dx <= 2; dx++) for (let dy = -2; dy <= 2; dy++) if (dx * dx + dy * dy <= 5) this.set(x + dx, y + dy, colour);
  }
  /** Text of digits and points, `scale` pixels a glyph pixel, right-aligned at x when `alignRight`. */
  text(s: string, x: number, y: number, { scale = 2, alignRight = false } = {}): void {
    const advance = 4 * scale;
    let left = alignRight ? x - s.length * advance : x;
    for (const ch of s) {
      const glyph = GLYPHS[ch];
      if (glyph) glyph.forEach((row, r) => [...row].forEach((bit, c) => bit === "1" && this.fillRect(left + c * scale, y + r * scale, scale, scale, [0, 0, 0])));
      left += advance;
    }
  }
  fillRect(x: number, y: number, w: number, h: number, colour: Rgb): void {
    for (let i = 0; i < w; i++) for (let j = 0; j < h; j++) this.set(x + i, y + j, colour);
  }
}

const [out, ...groups] = positionals;
if (!out || groups.length === 0) throw new Error("usage: bun bench/demo/plot-curves.ts OUT.png GROUP=RUN_DIR[,RUN_DIR...] ...");
const runs = groups.flatMap((arg, g) => {
  const [, dirs] = arg.split("=");
  if (!dirs) throw new Error(`"${arg}": expected GROUP=RUN_DIR[,RUN_DIR...]`);
  return dirs.split(",").map((dir) => ({ group: g, points: validations(dir) }));
});
const lastStep = Math.max(...runs.flatMap((r) => r.points.map(([s]) => s)), 1);
const low = Math.min(0, ...runs.flatMap((r) => r.points.map(([, y]) => y)));
if (low < 0) throw new Error(`values below 0 (${low}): the plot's axis is 0 to 1`);
const plotW = WIDTH - MARGIN.left - MARGIN.right;
const plotH = HEIGHT - MARGIN.top - MARGIN.bottom;
const px = (step: number) => MARGIN.left + (step / lastStep) * plotW;
const py = (success: number) => MARGIN.top + (1 - success) * plotH;

const canvas = new Canvas();
const grid: Rgb = [220, 220, 220];
for (let q = 0; q <= 4; q++) {
  const step = (lastStep * q) / 4;
  canvas.line(px(step), py(0), px(step), py(1), grid);
  canvas.text(String(Math.round(step)), px(step) + 2 * String(Math.round(step)).length * 2, py(0) + 8, { alignRight: true });
}
for (let k = 0; k <= 5; k++) {
  const success = k / 5;
  canvas.line(px(0), py(success), px(lastStep), py(success), grid);
  canvas.text(success.toFixed(1), MARGIN.left - 6, py(success) - 5, { alignRight: true });
}
canvas.line(px(0), py(0), px(lastStep), py(0), [0, 0, 0]);
canvas.line(px(0), py(0), px(0), py(1), [0, 0, 0]);
for (const { group, points } of runs) {
  const colour = GROUP_COLOURS[group % GROUP_COLOURS.length]!;
  points.forEach(([s, y], i) => {
    if (i > 0) canvas.line(px(points[i - 1]![0]), py(points[i - 1]![1]), px(s), py(y), colour, 2);
    canvas.dot(px(s), py(y), colour);
  });
}
writeFileSync(out, PNG.sync.write(canvas.png));
console.log(JSON.stringify({ out, runs: runs.map((r) => ({ group: groups[r.group]!.split("=")[0], validations: r.points })) }));
