/**
 * Learning curves of a training run as one PNG: a panel each for the reward, success
 * rate per env (training and validation), validation mean reward, KL, entropy and
 * response length, by verl's metric names as vagen's trainer writes them to
 * metrics.jsonl. Panels whose metrics the run never reported are left out.
 *
 * In src/core so the trainer can draw its run's plots at the end of a run and
 * `vagen monitor --png` can draw them from the files, with one drawing.
 */
import { mkdirSync, renameSync, rmSync, writeFileSync } from "node:fs";
import { basename, dirname, join, resolve } from "node:path";
import { encodePng } from "../png.ts";
import { renderFigure } from "./figure.ts";
import { type MetricRecord, readMetricsFile } from "./metrics-file.ts";
import { type LegendEntry, PALETTE, type PlotPanel, type PlotPoint, type PlotSeries } from "./panel.ts";
import { rgb } from "./raster.ts";

/** The colour of legend entries that show a line style (train, val) rather than an env. */
const STYLE_KEY = rgb("#555555");

export interface RunPlotOptions {
  /** The figure's title; by default the run directory's name (writeRunPlots) or "training run". */
  title?: string;
}

/** The first of `keys` that some record reports. */
function firstReported(records: readonly MetricRecord[], keys: readonly string[]): string | undefined {
  return keys.find((key) => records.some((r) => key in r.values));
}

/** The points of `key`: a step where it is absent is no point, a null value a gap. */
function pointsOf(records: readonly MetricRecord[], key: string): PlotPoint[] {
  return records.flatMap((r) => (key in r.values ? [{ x: r.step, y: r.values[key]! }] : []));
}

/** Env tags of keys like `train/<env>/success_rate`, in the order they first appear. */
function envTags(records: readonly MetricRecord[], pattern: RegExp): string[] {
  const tags = new Set<string>();
  for (const r of records) for (const key of Object.keys(r.values)) {
    const match = pattern.exec(key);
    if (match) tags.add(match[1]!);
  }
  return [...tags];
}

/** Mean over the envs that report a value at each step (the number best_actor is chosen by). */
function meanOver(records: readonly MetricRecord[], keys: readonly string[]): PlotPoint[] {
  return records.flatMap((r) => {
    const present = keys.filter((k) => k in r.values);
    if (present.length === 0) return [];
    const values = present.map((k) => r.values[k]!);
    return [{ x: r.step, y: values.some((v) => v === null) ? null : values.reduce((a, b) => a + b!, 0)! / values.length }];
  });
}

function single(records: readonly MetricRecord[], title: string, keys: readonly string[]): PlotPanel | undefined {
  const key = firstReported(records, keys);
  return key ? { title, yLabel: key, series: [{ label: key, points: pointsOf(records, key) }] } : undefined;
}

/** The panels a run's records can fill, in reading order. */
export function runPlotPanels(records: readonly MetricRecord[]): PlotPanel[] {
  const panels: (PlotPanel | undefined)[] = [];
  panels.push(single(records, "reward", ["critic/score/mean", "critic/rewards/mean"]));

  // Success: a colour per env, training solid and validation dashed with dots, so the two
  // splits of one env read together; the legend names the envs once and the styles once.
  const trainEnvs = envTags(records, /^train\/(.+)\/success_rate$/);
  const valEnvs = envTags(records, /^val\/(.+)\/success_rate$/);
  const envs = [...new Set([...trainEnvs, ...valEnvs])];
  const success: PlotSeries[] = envs.flatMap((env, i) => {
    const color = PALETTE[i % PALETTE.length]!;
    return [
      ...(trainEnvs.includes(env) ? [{ label: `${env} train`, color, points: pointsOf(records, `train/${env}/success_rate`) }] : []),
      ...(valEnvs.includes(env) ? [{ label: `${env} val`, color, points: pointsOf(records, `val/${env}/success_rate`), markers: true, dashed: true }] : []),
    ];
  });
  if (success.length > 0) {
    const legend: LegendEntry[] = [
      ...(envs.length > 1 ? envs.map((env, i) => ({ label: env, color: PALETTE[i % PALETTE.length]! })) : []),
      ...(trainEnvs.length > 0 && valEnvs.length > 0 ? [{ label: "train", color: STYLE_KEY }, { label: "val", color: STYLE_KEY, markers: true, dashed: true }] : []),
    ];
    const only = envs.length === 1 ? `: ${envs[0]}` : "";
    panels.push({ title: `success rate${only}`, yLabel: "success rate", series: success, yRange: [0, 1], legend });
  }

  // vagen's trainer writes val/<env>/mean_reward; a run that names it val/<env>/reward is read too.
  const rewardName = envTags(records, /^val\/(.+)\/mean_reward$/).length > 0 ? "mean_reward" : "reward";
  const rewardEnvs = envTags(records, new RegExp(`^val/(.+)/${rewardName}$`));
  if (rewardEnvs.length > 0) {
    const keys = rewardEnvs.map((env) => `val/${env}/${rewardName}`);
    const series: PlotSeries[] = rewardEnvs.map((env, i) => ({ label: env, points: pointsOf(records, keys[i]!), markers: true }));
    if (rewardEnvs.length > 1) series.push({ label: "mean", points: meanOver(records, keys), markers: true });
    // One env has no legend: the title names it.
    panels.push({ title: `validation mean reward${rewardEnvs.length === 1 ? `: ${rewardEnvs[0]}` : ""}`, yLabel: "mean reward", series });
  }

  const klKeys = ["actor/ppo_kl", "actor/kl_loss"].filter((k) => firstReported(records, [k]));
  if (klKeys.length > 0) panels.push({ title: "KL", yLabel: "KL", series: klKeys.map((k) => ({ label: k, points: pointsOf(records, k) })) });
  panels.push(single(records, "entropy", ["actor/entropy"]));
  const length = single(records, "response length", ["response_length/mean"]);
  panels.push(length && { ...length, yLabel: "tokens (mean)" });
  return panels.filter((p): p is PlotPanel => p !== undefined);
}

/** What a figure of these records covers, for its second line. */
function coverage(records: readonly MetricRecord[]): string {
  if (records.length === 0) return "no steps logged yet";
  const first = records[0]!.step;
  const last = records[records.length - 1]!.step;
  return `steps ${first}-${last} (${records.length} logged)`;
}

/** The run's learning curves as PNG bytes. */
export function renderRunPlots(records: readonly MetricRecord[], options: RunPlotOptions = {}): Uint8Array {
  const panels = runPlotPanels(records);
  return encodePng(renderFigure({ title: options.title ?? "training run", subtitle: coverage(records), panels }));
}

export interface RunPlotsWritten {
  path: string;
  /** Titles of the panels drawn. */
  panels: string[];
  /** Steps plotted. */
  steps: number;
  /** Lines of metrics.jsonl that were not metrics records. */
  skipped: number;
}

/**
 * Reads `<runDir>/metrics.jsonl` and writes its learning curves to `outPath` (a PNG),
 * replacing the file whole (written beside it, then renamed) so a viewer never opens half
 * a picture. Throws when metrics.jsonl cannot be read.
 */
export function writeRunPlots(runDir: string, outPath: string, options: RunPlotOptions = {}): RunPlotsWritten {
  const { records, skipped } = readMetricsFile(join(runDir, "metrics.jsonl"));
  const png = renderRunPlots(records, { title: options.title ?? basename(resolve(runDir)) });
  mkdirSync(dirname(resolve(outPath)), { recursive: true });
  const tmp = join(dirname(resolve(outPath)), `.tmp-${process.pid}-${basename(outPath)}`);
  try {
    writeFileSync(tmp, png);
    renameSync(tmp, outPath);
  } finally {
    rmSync(tmp, { force: true });
  }
  return { path: outPath, panels: runPlotPanels(records).map((p) => p.title), steps: records.length, skipped };
}
