/**
 * A figure: a title line and panels in a grid, every panel sharing one x range so a
 * step sits at the same place in each. Returns pixels; `encodePng` makes the file.
 */
import type { RGBImage } from "../image.ts";
import { GLYPH_HEIGHT, textWidth } from "./font.ts";
import { type PlotPanel, drawPanel } from "./panel.ts";
import { Raster, rgb } from "./raster.ts";

export interface Figure {
  title: string;
  /** A second, smaller line under the title (what the figure covers). */
  subtitle?: string;
  panels: readonly PlotPanel[];
  /** Panels per row; by default 3 from five panels, 2 from two, else 1. */
  columns?: number;
  panelWidth?: number;
  panelHeight?: number;
}

const MARGIN = 16;
const TITLE_SCALE = 3;
const SUBTITLE_SCALE = 2;

/** The x range of every point of every panel, or undefined when there is none. */
function sharedXDomain(panels: readonly PlotPanel[]): [number, number] | undefined {
  let lo = Infinity;
  let hi = -Infinity;
  for (const panel of panels) {
    for (const s of panel.series) {
      for (const p of s.points) {
        if (!Number.isFinite(p.x)) continue;
        lo = Math.min(lo, p.x);
        hi = Math.max(hi, p.x);
      }
    }
  }
  return lo === Infinity ? undefined : [lo, hi];
}

export function renderFigure(figure: Figure): RGBImage {
  const count = Math.max(1, figure.panels.length);
  const columns = Math.max(1, Math.min(count, figure.columns ?? (count >= 5 ? 3 : count >= 2 ? 2 : 1)));
  const rows = Math.ceil(count / columns);
  const panelWidth = figure.panelWidth ?? 560;
  const panelHeight = figure.panelHeight ?? 380;
  const header = MARGIN + GLYPH_HEIGHT * TITLE_SCALE + (figure.subtitle ? 8 + GLYPH_HEIGHT * SUBTITLE_SCALE : 0) + MARGIN;
  const width = Math.max(columns * panelWidth, textWidth(figure.title, TITLE_SCALE) + 2 * MARGIN) + 2 * MARGIN;
  const height = header + rows * panelHeight + MARGIN;
  const raster = new Raster(width, height);
  raster.text(figure.title, MARGIN, MARGIN, rgb("#111111"), { scale: TITLE_SCALE, bold: true });
  if (figure.subtitle) raster.text(figure.subtitle, MARGIN, MARGIN + GLYPH_HEIGHT * TITLE_SCALE + 8, rgb("#555555"), { scale: SUBTITLE_SCALE });
  const xDomain = sharedXDomain(figure.panels);
  figure.panels.forEach((panel, i) => {
    const area = { x: MARGIN + (i % columns) * panelWidth, y: header + Math.floor(i / columns) * panelHeight, width: panelWidth, height: panelHeight };
    // A faint card behind each panel keeps neighbours apart.
    raster.fillRect({ x: area.x + 4, y: area.y + 4, width: area.width - 8, height: area.height - 8 }, rgb("#fafafa"));
    drawPanel(raster, { x: area.x + 4, y: area.y + 4, width: area.width - 8, height: area.height - 8 }, panel, xDomain);
  });
  if (figure.panels.length === 0) {
    raster.text("no metrics to plot", MARGIN, header, rgb("#666666"), { scale: SUBTITLE_SCALE });
  }
  return raster.image();
}
