/**
 * Line-chart figures drawn straight to pixels (no browser, font file or native module):
 * `renderFigure` lays out panels, `encodePng` (../png.ts) writes them. Run plots
 * (learning curves of a training run's metrics.jsonl) are in run-plots.ts.
 */
export { type Figure, renderFigure } from "./figure.ts";
export { type LegendEntry, PALETTE, type PlotPanel, type PlotPoint, type PlotSeries } from "./panel.ts";
export { Raster, type Rgb, rgb } from "./raster.ts";
export { formatTick, niceTicks } from "./ticks.ts";
export { type MetricRecord, type MetricsFile, parseMetricsJson, parseMetricsText, readMetricsFile } from "./metrics-file.ts";
export { type RunPlotOptions, type RunPlotsWritten, renderRunPlots, runPlotPanels, writeRunPlots } from "./run-plots.ts";
