/**
 * `vagen monitor RUN_DIR`: the dashboard of a training or eval run, built from its files
 * (metrics.jsonl, rollouts/, episode folders), live while the run writes them or of a
 * finished run. `--once` (or output that is not a terminal) prints a text summary instead,
 * and fails, naming the file and its first bad line, when metrics.jsonl holds lines but
 * none that can be read. A live view of a directory that is deleted says so and stops
 * looking. `--png OUT` writes the run's learning curves (src/core/plot) to OUT and exits.
 */
import { existsSync } from "node:fs";
import { basename, join, resolve } from "node:path";
import type { Command } from "commander";
import { VagenError } from "../../core/errors.ts";
import { writeRunPlots } from "../../core/plot/run-plots.ts";
import { type ImageMode, parseImageMode, resolveImageMode } from "../../tui/image/index.ts";
import { startLiveDashboard } from "../../tui/live.tsx";
import { printable } from "../../tui/printable.ts";
import { RunDirReader } from "../../tui/run-dir.ts";
import { DashboardStore } from "../../tui/store.ts";
import { summaryText } from "../../tui/summary-text.ts";
import { numberFlag } from "../flags.ts";

interface MonitorOptions {
  once?: boolean;
  png?: string;
  tui: boolean;
  image: ImageMode;
  interval: number;
}

export function register(program: Command): void {
  program
    .command("monitor")
    .description("watch a training or eval run from its output directory (live dashboard on a terminal; --once for a text summary)")
    .argument("<run_dir>", "a run's output directory (with metrics.jsonl and rollouts/, or an eval output_dir)")
    .option("--once", "print a static text summary and exit (for scripts)")
    .option("--no-tui", "same as --once")
    .option("--png <out>", "write the run's learning curves (reward, success, validation, KL, entropy, response length) as a PNG to <out> and exit")
    .option("--image <mode>", "how observation images are drawn: auto, kitty, iterm2, sixel, blocks, none", parseImageModeFlag, "auto")
    .option("--interval <seconds>", "how often to look for new files", numberFlag("interval", { above: 0 }), 1)
    .action(async (runDir: string, options: MonitorOptions) => {
      await monitorCommand(runDir, options);
    });
}

function parseImageModeFlag(value: string): ImageMode {
  try {
    return parseImageMode(value);
  } catch (err) {
    throw new VagenError((err as Error).message);
  }
}

function openRunDir(runDir: string): RunDirReader {
  try {
    return new RunDirReader(runDir);
  } catch (err) {
    throw new VagenError((err as Error).message, "pass a run's output directory: the trainer's (metrics.jsonl, rollouts/) or an eval output_dir");
  }
}

/** `--png OUT`: the plots of a training run's metrics.jsonl; an eval run or unreadable metrics are errors. */
function writePlots(runDir: string, reader: RunDirReader, out: string): void {
  const metrics = join(runDir, "metrics.jsonl");
  if (reader.kind !== "train" || !existsSync(metrics)) {
    throw new VagenError(`${printable(runDir)}: no metrics.jsonl to plot${reader.kind === "eval" ? " (this is an eval run)" : ""}`, "--png draws a training run's learning curves; pass the trainer's output_dir");
  }
  const unreadable = reader.unreadableMetrics();
  if (unreadable) throw new VagenError(unreadable, "is this a vagen train run directory? each line of metrics.jsonl is one JSON object with a numeric \"step\"");
  const written = writeRunPlots(runDir, out);
  const skipped = written.skipped > 0 ? `; ${written.skipped} line(s) of metrics.jsonl skipped` : "";
  process.stdout.write(`${printable(out)}: ${written.steps} step(s), ${written.panels.length} panel(s) (${written.panels.join(", ") || "none"})${skipped}\n`);
}

async function monitorCommand(runDir: string, options: MonitorOptions): Promise<void> {
  const reader = openRunDir(runDir);
  if (options.png !== undefined) {
    reader.poll();
    writePlots(runDir, reader, options.png);
    return;
  }
  const store = new DashboardStore();
  for (const event of reader.poll()) store.dispatch(event);

  if (options.once || !options.tui || !process.stdout.isTTY || !process.stdin.isTTY) {
    const unreadable = reader.unreadableMetrics();
    if (unreadable) throw new VagenError(unreadable, "is this a vagen train run directory? each line of metrics.jsonl is one JSON object with a numeric \"step\"");
    process.stdout.write(summaryText(store.getState()));
    return;
  }

  const dashboard = startLiveDashboard({
    store,
    title: `vagen monitor ${basename(resolve(runDir))}`,
    protocol: resolveImageMode(options.image),
    onInterrupt: { kind: "now", run: () => void dashboard.close() },
  });
  const timer = setInterval(() => {
    for (const event of reader.poll()) store.dispatch(event);
    // Nothing more can appear in a directory that is gone: the view keeps its message.
    if (reader.gone) clearInterval(timer);
  }, options.interval * 1000);
  try {
    await dashboard.closed;
  } finally {
    clearInterval(timer);
  }
  // The dashboard's screen is gone with it: leave the reason on the terminal too.
  if (reader.gone) process.stderr.write(`vagen monitor: the run directory ${printable(runDir)} is gone (deleted or moved)\n`);
}
