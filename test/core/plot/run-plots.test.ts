import { afterEach, describe, expect, test } from "bun:test";
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { renderFigure } from "../../../src/core/plot/figure.ts";
import { runningMean, smoothingHalfWindow } from "../../../src/core/plot/panel.ts";
import { parseMetricsText } from "../../../src/core/plot/metrics-file.ts";
import { rgb } from "../../../src/core/plot/raster.ts";
import { runPlotPanels, writeRunPlots } from "../../../src/core/plot/run-plots.ts";
import { decodePng } from "../../../src/core/png.ts";
import type { RGBImage } from "../../../src/core/image.ts";

const temporaries: string[] = [];
afterEach(() => {
  for (const dir of temporaries.splice(0)) rmSync(dir, { recursive: true, force: true });
});

function temporary(): string {
  const dir = mkdtempSync(join(tmpdir(), "vagen-plot-"));
  temporaries.push(dir);
  return dir;
}

const same = (image: RGBImage, x: number, y: number, color: readonly number[]) => {
  const i = (y * image.width + x) * 3;
  return image.data[i] === color[0] && image.data[i + 1] === color[1] && image.data[i + 2] === color[2];
};

/** Columns of `image` holding at least one pixel of exactly `color`. */
function columnsWith(image: RGBImage, color: readonly number[]): number[] {
  const columns: number[] = [];
  for (let x = 0; x < image.width; x++) {
    for (let y = 0; y < image.height; y++) {
      if (same(image, x, y, color)) {
        columns.push(x);
        break;
      }
    }
  }
  return columns;
}

describe("metrics.jsonl as records", () => {
  test("junk lines are counted and skipped; null and Python's NaN are gaps; a step written again replaces the first", () => {
    const text = [
      '{"step": 1, "a": 0.5, "b": null}',
      "not json",
      '{"step": 2, "a": NaN, "b": -Infinity, "note": "NaN, kept as text"}',
      "null",
      '{"step": "3", "a": 1}',
      '{"step": 1, "a": 0.25}',
      '{"step": 4, "a": 1',
    ].join("\n");
    const { records, skipped } = parseMetricsText(text);
    expect(records).toEqual([
      { step: 1, values: { a: 0.25 } },
      { step: 2, values: { a: null, b: null } },
    ]);
    // "not json", "null" and the string step; the last line, cut off mid-write, is not counted.
    expect(skipped).toBe(3);
  });
});

describe("the run's panels", () => {
  const records = parseMetricsText(
    [
      { step: 1, "critic/score/mean": 0.1, "actor/ppo_kl": 0.01, "actor/entropy": 2, "response_length/mean": 90, "train/sokoban/success_rate": 0.1, "train/frozenlake/success_rate": 0.2 },
      { step: 2, "critic/score/mean": 0.2, "actor/ppo_kl": 0.02, "actor/kl_loss": 0.001, "actor/entropy": 1.9, "response_length/mean": 80, "train/sokoban/success_rate": 0.3, "val/sokoban/success_rate": 0.25, "val/sokoban/mean_reward": 0.5, "val/frozenlake/mean_reward": 0.7 },
    ]
      .map((r) => JSON.stringify(r))
      .join("\n"),
  ).records;

  test("one panel per quantity, legends' labels per env and split, the mean of the envs' validation rewards", () => {
    const panels = runPlotPanels(records);
    expect(panels.map((p) => p.title)).toEqual(["reward", "success rate", "validation mean reward", "KL", "entropy", "response length"]);
    const [reward, success, validation, kl] = panels;
    expect(reward!.yLabel).toBe("critic/score/mean");
    expect(success!.series.map((s) => s.label)).toEqual(["sokoban train", "sokoban val", "frozenlake train"]);
    expect(success!.yRange).toEqual([0, 1]);
    // One colour per env; validation dashed with dots. The legend names each env and each style once.
    const [sokobanTrain, sokobanVal, frozenlakeTrain] = success!.series;
    expect(sokobanVal!.color).toEqual(sokobanTrain!.color!);
    expect(frozenlakeTrain!.color).not.toEqual(sokobanTrain!.color!);
    expect([sokobanVal!.dashed, sokobanVal!.markers, sokobanTrain!.dashed]).toEqual([true, true, undefined]);
    expect(success!.legend!.map((e) => e.label)).toEqual(["sokoban", "frozenlake", "train", "val"]);
    expect(validation!.series.map((s) => s.label)).toEqual(["sokoban", "frozenlake", "mean"]);
    // (0.5 + 0.7) / 2 at step 2; no validation at step 1, so no point there.
    expect(validation!.series[2]!.points.map((p) => [p.x, Number(p.y!.toFixed(6))])).toEqual([[2, 0.6]]);
    expect(kl!.series.map((s) => [s.label, s.points.length])).toEqual([["actor/ppo_kl", 2], ["actor/kl_loss", 1]]);
  });

  test("panels whose metrics the run never reported are left out; one env's validation is named in the title", () => {
    const panels = runPlotPanels(parseMetricsText('{"step": 3, "actor/entropy": 1, "val/sokoban/mean_reward": 0.4}').records);
    expect(panels.map((p) => p.title)).toEqual(["validation mean reward: sokoban", "entropy"]);
    expect(panels[0]!.series.map((s) => s.label)).toEqual(["sokoban"]);
    expect(panels[0]!.series[0]!.markers).toBe(true);
  });
});

describe("figures", () => {
  const BLUE = rgb("#1f77b4");

  test("a gap (null) breaks the line: no line pixels between the points around it", () => {
    const points = Array.from({ length: 101 }, (_, x) => ({ x, y: x >= 40 && x <= 60 ? null : 1 }));
    const image = renderFigure({ title: "t", panels: [{ title: "p", yLabel: "y", series: [{ label: "s", points, markers: false }] }] });
    const columns = columnsWith(image, BLUE);
    const left = columns[0]!;
    const right = columns[columns.length - 1]!;
    // x = 39 and x = 61 end the two runs; x = 50 (the middle of the gap) is drawn nowhere.
    const at = (x: number) => Math.round(left + ((right - left) * x) / 100);
    expect(columns).toContain(at(20));
    expect(columns).toContain(at(80));
    for (let x = at(42); x <= at(58); x++) expect(columns).not.toContain(x);
  });

  test("long series are smoothed: the mean of 1% of the points each side, fewer at the ends", () => {
    expect([smoothingHalfWindow(99), smoothingHalfWindow(100), smoothingHalfWindow(20_000)]).toEqual([0, 1, 200]);
    const run = [1, 2, 3, 4, 10].map((y, x) => ({ x, y }));
    // Window of 3: (1 + 2) / 2, (1 + 2 + 3) / 3, (2 + 3 + 4) / 3, (3 + 4 + 10) / 3, (4 + 10) / 2.
    expect(runningMean(run, 1).map((p) => p.y)).toEqual([1.5, 2, 3, 17 / 3, 7]);
    expect(runningMean(run, 1).map((p) => p.x)).toEqual([0, 1, 2, 3, 4]);
  });

  test("a point alone between gaps is drawn as a dot", () => {
    const points = [{ x: 0, y: 0 }, { x: 1, y: null }, { x: 2, y: 5 }, { x: 3, y: null }, { x: 4, y: 0 }];
    const image = renderFigure({ title: "t", panels: [{ title: "p", yLabel: "y", series: [{ label: "s", points, markers: false }] }] });
    const columns = columnsWith(image, BLUE);
    const left = columns[0]!;
    const right = columns[columns.length - 1]!;
    // The middle point's dot (radius 3) is there at x = 2.
    expect(columns).toContain(Math.round((left + right) / 2));
  });

  test("panels share one x range, laid out three to a row from five panels", () => {
    const panel = (title: string, from: number, to: number) => ({ title, yLabel: "y", series: [{ label: title, points: [{ x: from, y: 0 }, { x: to, y: 1 }] }] });
    const image = renderFigure({ title: "t", panels: [panel("a", 0, 100), panel("b", 50, 100), panel("c", 0, 10), panel("d", 0, 1), panel("e", 0, 1)], panelWidth: 400, panelHeight: 300 });
    // 3 columns of 400 plus margins, 2 rows of 300 plus the title.
    expect(image.width).toBe(3 * 400 + 32);
    expect(image.height).toBeGreaterThan(600);
    expect(image.height).toBeLessThan(700);
  });

  test("a figure with nothing to plot still draws, saying so", () => {
    const image = renderFigure({ title: "empty run", panels: [] });
    expect(image.width).toBeGreaterThan(0);
    expect(image.data.some((v) => v < 200)).toBe(true);
  });
});

describe("writeRunPlots", () => {
  test("reads metrics.jsonl and writes a PNG in place of the old one, leaving no temporary file", () => {
    const dir = temporary();
    const lines = Array.from({ length: 200 }, (_, i) => JSON.stringify({ step: i + 1, "critic/score/mean": i % 50 === 0 ? null : i / 200, "actor/entropy": 2 - i / 200 }));
    writeFileSync(join(dir, "metrics.jsonl"), `${lines.join("\n")}\njunk\n`);
    const out = join(dir, "plots", "curves.png");
    writeFileSync(join(dir, "stale.png"), "old");
    const written = writeRunPlots(dir, out);
    expect(written).toEqual({ path: out, panels: ["reward", "entropy"], steps: 200, skipped: 1 });
    const image = decodePng(new Uint8Array(readFileSync(out)));
    // Two panels side by side.
    expect(image.width).toBe(2 * 560 + 32);
    expect(readdirSync(join(dir, "plots"))).toEqual(["curves.png"]);
    // Written again over itself.
    writeRunPlots(dir, out, { title: "again" });
    expect(readdirSync(join(dir, "plots"))).toEqual(["curves.png"]);
  });

  test("a run without metrics.jsonl is an error naming the file", () => {
    const dir = temporary();
    expect(() => writeRunPlots(dir, join(dir, "p.png"))).toThrow(join(dir, "metrics.jsonl"));
    expect(existsSync(join(dir, "p.png"))).toBe(false);
  });
});
