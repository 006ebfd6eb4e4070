/**
 * `vagen demo`: a small vision-language policy made in-process, warm-started on imperfect
 * demonstrations, then improved by RL (the `vagen train` loop) and validated on held-out
 * boards; minutes on a CPU, nothing downloaded. Thin: parse the flags, run src/demo with a
 * view of its events (the live dashboard on a terminal during RL, plain lines otherwise),
 * print the summary (`--json`: as the last line).
 */
import type { Command } from "commander";
import * as torch from "../../torch/index.ts";
import { join } from "node:path";
import { runDemo, type DemoEvent, type DemoSummary } from "../../demo/demo.ts";
import { DEMO_FORMATS, type DemoEnv, type DemoFormat } from "../../demo/task.ts";
import { demoRecipe } from "../../demo/recipe.ts";
import { VagenError } from "../../core/errors.ts";
import type { TrainEventListener } from "../../training/events.ts";
import { startTrainDashboard, type TrainDashboard } from "../../tui/train-dashboard.ts";
import { type ImageMode, parseImageMode, resolveImageMode } from "../../tui/image/index.ts";
import { integerFlag } from "../flags.ts";
import { trainLogRenderer } from "../render/train-lines.ts";
import { abortOnStopSignals, signalKey, STOP_SIGNALS } from "../signals.ts";
import { sftEventLine } from "./sft.ts";

interface DemoFlags {
  env: string;
  render: string;
  format?: string;
  algorithm: string;
  steps?: number;
  seed: number;
  device: string;
  out?: string;
  json?: boolean;
  tui: boolean;
  image: ImageMode;
}

export function register(program: Command): void {
  program
    .command("demo")
    .description("watch an agent learn in minutes on a CPU: a small Qwen2.5-VL-architecture policy, supervised warm start, then RL, then validation on held-out boards")
    .option("--env <name>", "frozenlake or sokoban", "frozenlake")
    .option("--render <mode>", "what the policy sees: vision (images) or text (a character grid)", "vision")
    .option("--format <name>", "what the policy writes: answer, free_think (a plan first) or wm (Sokoban: the state seen and the state after the move, with state rewards); default: wm for Sokoban on CUDA (VAGEN's default there), answer otherwise")
    .option("--algorithm <name>", "gigpo (per-turn credit), grpo (the episode's outcome on every turn), ppo (with a critic), or bi_level (a critic and bi-level GAE)", "gigpo")
    .option("--steps <n>", "RL steps (default: the recipe's)", integerFlag("steps", { min: 1 }))
    .option("--seed <n>", "seed of the policy's initialisation, the data and the sampling", integerFlag("seed", { min: 0 }), 0)
    .option("--device <device>", "cpu, or cuda (a bigger recipe)", "cpu")
    .option("--out <dir>", "run directory (default: runs/demo/<env>-<render>-<time>)")
    .option("--json", "print the summary as JSON on the last line")
    .option("--no-tui", "plain lines instead of the live dashboard, even on a terminal")
    .option("--image <mode>", "how the dashboard draws observation images: auto, kitty, iterm2, sixel, blocks, none", parseImageModeFlag, "auto")
    .action(async (opts: DemoFlags) => {
      process.exitCode = await demoCommand(opts);
    });
}

function parseImageModeFlag(value: string): ImageMode {
  try {
    return parseImageMode(value);
  } catch (err) {
    throw new VagenError((err as Error).message);
  }
}

function pick<T extends string>(flag: string, value: string, allowed: readonly T[]): T {
  if (!(allowed as readonly string[]).includes(value)) throw new VagenError(`--${flag}: got ${JSON.stringify(value)}, expected one of ${allowed.join(", ")}`);
  return value as T;
}

/** The format a demo runs when `--format` is not given: its recipe's (wm for Sokoban on CUDA), else answers. */
export function defaultFormat(env: DemoEnv, device: string): DemoFormat {
  return demoRecipe(device, env).defaultFormat ?? "answer";
}

async function demoCommand(opts: DemoFlags): Promise<number> {
  const env = pick("env", opts.env, ["frozenlake", "sokoban"] as const);
  const render = pick("render", opts.render, ["vision", "text"] as const);
  const format = pick("format", opts.format ?? defaultFormat(env, opts.device), DEMO_FORMATS);
  if (format === "wm" && env !== "sokoban") throw new VagenError(`--format wm: only with --env sokoban (FrozenLake's demo has no world-model demonstrations)`);
  const algorithm = pick("algorithm", opts.algorithm, ["gigpo", "grpo", "ppo", "bi_level"] as const);
  if (!/^(cpu|cuda(:\d+)?)$/.test(opts.device)) throw new VagenError(`--device: got ${JSON.stringify(opts.device)}, expected cpu, cuda or cuda:N`);
  // Checked before anything is built or written: no run folder is left behind for a device that is not there.
  if (opts.device !== "cpu") {
    const index = opts.device === "cuda" ? 0 : Number(opts.device.slice(5));
    const count = torch.cuda.deviceCount();
    if (index >= count) {
      throw new VagenError(
        `--device ${opts.device}: ${count === 0 ? "no CUDA device is available (or this libtorch has no CUDA)" : `only ${count} CUDA device(s) (cuda:0..cuda:${count - 1})`}`,
        "run `vagen doctor` to see what vagen found, or use --device cpu",
      );
    }
  }
  const stamp = new Date().toISOString().replace(/[:.]/g, "-").slice(0, 19);
  const runDir = opts.out ?? join("runs", "demo", `${env}-${render}${format === "answer" ? "" : `-${format}`}-${stamp}`);

  const say = (line: string) => process.stderr.write(`${line}\n`);
  const lines = trainLogRenderer(process.stderr);
  const wantsDashboard = opts.tui && process.stdout.isTTY && process.stdin.isTTY;
  const controller = new AbortController();
  let dashboard: TrainDashboard | undefined;
  let trainView: TrainEventListener = lines;
  // A stop signal (Ctrl-C, SIGTERM, SIGHUP) ends the phase in progress after its step;
  // a second one leaves at once.
  const signals = abortOnStopSignals(controller, { first: (signal) => say(`${signal}: stopping after this step (${signalKey(signal)} again to quit now)`) });

  const onEvent = (event: DemoEvent) => {
    if (event.type === "phase") {
      if (event.phase === "rl" && wantsDashboard) {
        // The dashboard takes the terminal for the RL phase; q gives it back to plain lines.
        dashboard = startTrainDashboard({
          protocol: resolveImageMode(opts.image),
          outputDir: runDir,
          onSaveAndStop: () => controller.abort(),
          onStop: () => controller.abort(),
          onQuit: () => (trainView = lines),
        });
        trainView = dashboard.onEvent;
      }
      if (!dashboard) {
        say(event.message);
        if (event.phase === "done") saidSummary = true;
      }
    } else if (event.type === "probe") {
      say(`sft probe after step ${event.step}: greedy success ${event.successRate.toFixed(2)} on ${event.episodes} probe levels (the warm start ends at ${event.target.toFixed(2)})`);
    } else if (event.type === "sft") {
      // One line per step would flood the terminal for a phase of a minute: every tenth, and the rest.
      if (event.event.type !== "step" || event.event.step % 10 === 0 || event.event.step === event.event.totalSteps) say(sftEventLine(event.event));
    } else {
      trainView(event.event);
    }
  };

  let saidSummary = false;
  let summary: DemoSummary;
  try {
    summary = await runDemo({ env, render, format, algorithm, steps: opts.steps, seed: opts.seed, device: opts.device, runDir, signal: controller.signal }, onEvent);
  } catch (err) {
    // runDemo reports an interrupted phase as Ctrl-C's 130: the status of the signal received.
    if (signals.received && err instanceof VagenError && err.exitCode === STOP_SIGNALS.SIGINT) throw new VagenError(err.message, err.hint, STOP_SIGNALS[signals.received]);
    throw err;
  } finally {
    await dashboard?.close();
    signals.off();
  }
  // The dashboard took the run's last line; say it once it has given the terminal back.
  if (!saidSummary) say(`success on held-out boards: ${summary.sft_success_rate.toFixed(2)} after sft -> ${summary.final_success_rate.toFixed(2)} after rl, ${summary.seconds.toFixed(0)} s`);
  say(`run directory: ${summary.run_dir} (vagen monitor ${summary.run_dir}; the supervised policy is ${join(summary.run_dir, "sft", "final")})`);
  if (opts.json) process.stdout.write(`${JSON.stringify(summary)}\n`);
  return 0;
}
