/**
 * One chart panel: a title, a legend when there are several lines, a plot area with grid
 * lines, ticked and labelled axes, and the series as lines (with dots where points are
 * few or stand alone). Draws into a rectangle of a `Raster`; knows nothing of runs or
 * metric names.
 */
import { GLYPH_HEIGHT, textWidth } from "./font.ts";
import { type Pixel, type Raster, type Rect, type Rgb, rgb } from "./raster.ts";
import { formatTick, niceTicks } from "./ticks.ts";

/** A point of a series; `y: null` is a gap (a NaN the run reported): the line breaks there. */
export interface PlotPoint {
  x: number;
  y: number | null;
}

export interface PlotSeries {
  label: string;
  points: readonly PlotPoint[];
  color?: Rgb;
  /**
   * A sparse series (validations): dots at its points while they are far enough apart,
   * and never smoothed. Other series get dots only where points are far apart, and past
   * 100 points are drawn light with their running mean on top.
   */
  markers?: boolean;
  dashed?: boolean;
}

/** An entry of a panel's legend: a swatch drawn like a series, and its label. */
export interface LegendEntry {
  label: string;
  color: Rgb;
  markers?: boolean;
  dashed?: boolean;
}

export interface PlotPanel {
  title: string;
  yLabel: string;
  xLabel?: string;
  series: readonly PlotSeries[];
  /** A range the y axis always covers (rates: [0, 1]), widened to fit the data. */
  yRange?: readonly [number, number];
  /** The legend, when the series' own labels are not it (colour per env, style per split); by default one entry per series, shown for two or more. */
  legend?: readonly LegendEntry[];
}

/** matplotlib's tab10, so the plots look like what users already read. */
export const PALETTE: readonly Rgb[] = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf"].map(rgb);

const INK = rgb("#222222");
const MUTED = rgb("#666666");
const GRID = rgb("#e6e6e6");
const FRAME = rgb("#999999");
const WHITE = rgb("#ffffff");

/** Text sizes and spacing, in pixels at font scale `SCALE`. */
const SCALE = 2;
const LINE = GLYPH_HEIGHT * SCALE;
const PAD = 10;
const TICK = 5;
const LINE_WIDTH = 2;
const DOT_RADIUS = 3;
const DASH: readonly [number, number] = [7, 5];

/** The finite y values of the panel, and the x span of every point. */
function extent(panel: PlotPanel): { xMin: number; xMax: number; yMin: number; yMax: number } | undefined {
  let xMin = Infinity;
  let xMax = -Infinity;
  let yMin = Infinity;
  let yMax = -Infinity;
  for (const s of panel.series) {
    for (const p of s.points) {
      if (!Number.isFinite(p.x)) continue;
      xMin = Math.min(xMin, p.x);
      xMax = Math.max(xMax, p.x);
      if (p.y === null || !Number.isFinite(p.y)) continue;
      yMin = Math.min(yMin, p.y);
      yMax = Math.max(yMax, p.y);
    }
  }
  if (xMin === Infinity) return undefined;
  if (yMin === Infinity) [yMin, yMax] = panel.yRange ?? [0, 1];
  if (panel.yRange) [yMin, yMax] = [Math.min(yMin, panel.yRange[0]), Math.max(yMax, panel.yRange[1])];
  return { xMin, xMax, yMin, yMax };
}

/** Runs of consecutive finite points: a gap (null) ends one. */
function runsOf(points: readonly PlotPoint[]): PlotPoint[][] {
  const runs: PlotPoint[][] = [];
  let current: PlotPoint[] = [];
  for (const p of [...points].sort((a, b) => a.x - b.x)) {
    if (p.y === null || !Number.isFinite(p.y) || !Number.isFinite(p.x)) {
      if (current.length) runs.push(current);
      current = [];
    } else current.push(p);
  }
  if (current.length) runs.push(current);
  return runs;
}

/**
 * At most two pixels per column: each column's first, lowest, highest and last point in
 * x order, so a run of 100k steps draws as fast as one of 500 and keeps its spikes.
 */
function thin(pixels: Pixel[]): Pixel[] {
  if (pixels.length <= 4096) return pixels;
  const out: Pixel[] = [];
  let start = 0;
  while (start < pixels.length) {
    const column = Math.floor(pixels[start]!.x);
    let end = start;
    let low = start;
    let high = start;
    while (end < pixels.length && Math.floor(pixels[end]!.x) === column) {
      if (pixels[end]!.y > pixels[low]!.y) low = end;
      if (pixels[end]!.y < pixels[high]!.y) high = end;
      end++;
    }
    for (const k of [start, Math.min(low, high), Math.max(low, high), end - 1]) if (out[out.length - 1] !== pixels[k]) out.push(pixels[k]!);
    start = end;
  }
  return out;
}

/** The legend as drawn: the panel's own, or one entry per series when there are several. */
function legendOf(panel: PlotPanel, colors: readonly Rgb[]): LegendEntry[] {
  if (panel.legend) return [...panel.legend];
  if (panel.series.length < 2) return [];
  return panel.series.map((s, i) => ({ label: s.label, color: colors[i]!, markers: s.markers, dashed: s.dashed }));
}

/** Legend entries laid out in rows under the title: each a swatch and its label. */
function legendRows(series: readonly LegendEntry[], width: number): LegendEntry[][] {
  const rows: LegendEntry[][] = [[]];
  let used = 0;
  for (const s of series) {
    const entry = 24 + textWidth(s.label, SCALE) + 16;
    if (used > 0 && used + entry > width) {
      rows.push([]);
      used = 0;
    }
    rows[rows.length - 1]!.push(s);
    used += entry;
  }
  return rows;
}

/** A label cut to `width` pixels, with `..` where it was cut. */
function fit(text: string, width: number): string {
  if (textWidth(text, SCALE) <= width) return text;
  let cut = text;
  while (cut.length > 0 && textWidth(`${cut}..`, SCALE) > width) cut = cut.slice(0, -1);
  return `${cut}..`;
}

/**
 * Draws `panel` inside `area`. `xDomain`, when given, is the x range every panel of a
 * figure shares (so steps line up from panel to panel).
 */
export function drawPanel(raster: Raster, area: Rect, panel: PlotPanel, xDomain?: readonly [number, number]): void {
  const colors = panel.series.map((s, i) => s.color ?? PALETTE[i % PALETTE.length]!);
  const range = extent(panel);
  const xTicks = range || xDomain ? niceTicks(xDomain?.[0] ?? range!.xMin, xDomain?.[1] ?? range!.xMax, 6, true) : undefined;
  const yTicks = range ? niceTicks(range.yMin, range.yMax, 5) : undefined;
  const yLabels = yTicks?.values.map((v) => formatTick(v, yTicks.step)) ?? [];
  const labelWidth = Math.max(0, ...yLabels.map((l) => textWidth(l, SCALE)));
  const plotLeft = area.x + PAD + LINE + PAD + labelWidth + TICK + 4;

  let top = area.y + PAD;
  const title = fit(panel.title, area.width - 2 * PAD);
  raster.text(title, area.x + (area.width - textWidth(title, SCALE)) / 2, top, INK, { scale: SCALE, bold: true });
  top += LINE + PAD;

  const legend = legendOf(panel, colors);
  if (legend.length > 0) {
    for (const row of legendRows(legend, area.x + area.width - PAD - plotLeft)) {
      let x = plotLeft;
      for (const s of row) {
        const mid = top + LINE / 2 - 1;
        raster.polyline([{ x, y: mid }, { x: x + 20, y: mid }], s.color, LINE_WIDTH + 1, area, s.dashed ? [4, 3] : undefined);
        if (s.markers) raster.dot({ x: x + 10, y: mid }, DOT_RADIUS, s.color, area);
        raster.text(fit(s.label, area.x + area.width - PAD - x - 26), x + 26, top, INK, { scale: SCALE });
        x += 24 + textWidth(s.label, SCALE) + 16;
      }
      top += LINE + 4;
    }
    top += PAD / 2;
  }

  const plot: Rect = { x: plotLeft, y: top, width: 0, height: 0 };
  // Room on the right for half of the last step's label, which is centred on the edge.
  const lastX = xTicks ? formatTick(xTicks.max, xTicks.step) : "";
  plot.width = area.x + area.width - Math.max(PAD, textWidth(lastX, SCALE) / 2 + 4) - plot.x;
  plot.height = area.y + area.height - PAD - LINE - 6 - LINE - TICK - 4 - plot.y;
  if (plot.width < 20 || plot.height < 20) return;

  // Axis titles: y turned along the left edge, x centred under the tick labels.
  const yTitle = fit(panel.yLabel, plot.height);
  raster.text(yTitle, area.x + PAD, plot.y + (plot.height - textWidth(yTitle, SCALE)) / 2, MUTED, { scale: SCALE, vertical: true });
  const xTitle = panel.xLabel ?? "step";
  raster.text(xTitle, plot.x + (plot.width - textWidth(xTitle, SCALE)) / 2, area.y + area.height - PAD - LINE, MUTED, { scale: SCALE });

  if (!range || !xTicks || !yTicks) {
    const message = "no data";
    raster.text(message, plot.x + (plot.width - textWidth(message, SCALE)) / 2, plot.y + plot.height / 2 - LINE / 2, MUTED, { scale: SCALE });
    raster.straightLine(plot.x, plot.y + plot.height, plot.x + plot.width, plot.y + plot.height, FRAME);
    raster.straightLine(plot.x, plot.y, plot.x, plot.y + plot.height, FRAME);
    return;
  }

  const xPixel = (x: number) => plot.x + ((x - xTicks.min) / (xTicks.max - xTicks.min)) * plot.width;
  const yPixel = (y: number) => plot.y + plot.height - ((y - yTicks.min) / (yTicks.max - yTicks.min)) * plot.height;

  // Grid and ticks.
  const bottom = plot.y + plot.height;
  yTicks.values.forEach((v, i) => {
    const y = Math.round(yPixel(v));
    raster.straightLine(plot.x, y, plot.x + plot.width, y, GRID);
    raster.straightLine(plot.x - TICK, y, plot.x - 1, y, FRAME);
    const label = yLabels[i]!;
    raster.text(label, plot.x - TICK - 4 - textWidth(label, SCALE), y - LINE / 2 + 2, INK, { scale: SCALE });
  });
  let lastLabelEnd = -Infinity;
  for (const v of xTicks.values) {
    const x = Math.round(xPixel(v));
    raster.straightLine(x, plot.y, x, bottom, GRID);
    raster.straightLine(x, bottom + 1, x, bottom + TICK, FRAME);
    const label = formatTick(v, xTicks.step);
    const left = x - textWidth(label, SCALE) / 2;
    // Labels that would touch the previous one are left out (the tick stays).
    if (left < lastLabelEnd + 8) continue;
    raster.text(label, left, bottom + TICK + 4, INK, { scale: SCALE });
    lastLabelEnd = left + textWidth(label, SCALE);
  }
  raster.straightLine(plot.x, plot.y, plot.x, bottom, FRAME);
  raster.straightLine(plot.x, bottom, plot.x + plot.width, bottom, FRAME);

  // The lines, clipped a little outside the plot so a line on the frame stays whole.
  const clip: Rect = { x: plot.x - DOT_RADIUS - 1, y: plot.y - DOT_RADIUS - 1, width: plot.width + 2 * DOT_RADIUS + 2, height: plot.height + 2 * DOT_RADIUS + 2 };
  panel.series.forEach((s, i) => {
    const color = colors[i]!;
    const runs = runsOf(s.points);
    const count = runs.reduce((n, r) => n + r.length, 0);
    // Dots where points are far apart (validations, short runs); too dense, they would only thicken the line.
    const dots = count <= plot.width / (s.markers ? 8 : 12);
    const half = s.markers || dots ? 0 : smoothingHalfWindow(count);
    const toPixels = (run: PlotPoint[]) => run.map((p) => ({ x: xPixel(p.x), y: yPixel(p.y!) }));
    for (const run of runs) {
      if (half > 0 && run.length > 1) {
        // A long noisy series: the raw values in a light shade, their running mean on top.
        raster.polyline(thin(toPixels(run)), lighten(color), LINE_WIDTH - 1, clip);
        raster.polyline(thin(toPixels(runningMean(run, half))), color, LINE_WIDTH, clip);
        continue;
      }
      const pixels = toPixels(run);
      raster.polyline(thin(pixels), color, LINE_WIDTH, clip, s.dashed ? DASH : undefined);
      // A point alone between gaps would be invisible as a line: always a dot. Dots get a
      // white ring so a validation's dots stand out on a training line of the same colour.
      if (dots || run.length === 1) {
        for (const p of pixels) {
          raster.dot(p, DOT_RADIUS + 1.5, WHITE, clip);
          raster.dot(p, DOT_RADIUS, color, clip);
        }
      }
    }
  });
}

/** Half the running-mean window for a series of `count` points: none below 100 points, then 1% of them each side. */
export function smoothingHalfWindow(count: number): number {
  return count < 100 ? 0 : Math.floor(count / 100);
}

/** Each point's value replaced by the mean of the points within `half` places of it (fewer at the ends). */
export function runningMean(run: readonly PlotPoint[], half: number): PlotPoint[] {
  const sums = [0];
  for (const p of run) sums.push(sums[sums.length - 1]! + p.y!);
  return run.map((p, i) => {
    const from = Math.max(0, i - half);
    const to = Math.min(run.length, i + half + 1);
    return { x: p.x, y: (sums[to]! - sums[from]!) / (to - from) };
  });
}

/** `color` two thirds of the way to white. */
function lighten(color: Rgb): Rgb {
  const toWhite = (c: number) => Math.round(c + (255 - c) * 0.65);
  return [toWhite(color[0]), toWhite(color[1]), toWhite(color[2])];
}
