/**
 * `vagen env play` in a terminal: draws the events of a hand-played episode
 * (envs/cli/play.ts): observation text, images as half-block colour pixels (or a
 * placeholder without colour), reward, metrics and how the response was parsed.
 */
import type { PlayEvent } from "../../../envs/cli/play.ts";
import { halfBlockLines } from "../../../envs/cli/terminal-image.ts";
import type { EnvInfo, Observation } from "../../../envs/_common/types.ts";
import type { Writable } from "./writable.ts";

export interface EnvPlayViewOptions {
  /** Where to draw (stdout by default). */
  output?: Writable;
  /** Columns available for images; defaults to the terminal width. */
  columns?: number;
  /** Draw images in colour (false: `[image WxH]`). */
  color?: boolean;
}

export function envPlayRenderer(options: EnvPlayViewOptions = {}): (event: PlayEvent) => void {
  const output = options.output ?? process.stdout;
  const write = (text = "") => output.write(`${text}\n`);
  const columns = Math.max(16, Math.min(options.columns ?? (process.stdout.columns || 80), 128));
  const color = options.color ?? true;
  const show = (obs: Observation) => {
    write(obs.text.trimEnd());
    if (color) for (const image of obs.images) for (const line of halfBlockLines(image, Math.min(columns, 64))) write(line);
    else for (const image of obs.images) write(`[image ${image.width}x${image.height}]`);
  };
  return (event) => {
    switch (event.type) {
      case "help":
        write(event.text);
        return;
      case "episode_started":
        write(`\n=== seed ${event.seed} ===`);
        show(event.obs);
        return;
      case "awaiting_input":
        output.write(`\n[turn ${event.turn}] > `);
        return;
      case "system_prompt":
        write(event.obs.text);
        return;
      case "stepped":
        show(event.obs);
        write(stepSummary(event.reward, event.totalReward, event.done, event.info));
        if (event.done) write(event.info.success ? "Solved! (:r for the next seed, :q to quit)" : "Episode over. (:r for the next seed, :q to quit)");
        return;
    }
  };
}

/** Reward, whether it ended, and what the env parsed and measured. */
function stepSummary(reward: number, total: number, done: boolean, info: EnvInfo): string {
  const turnMetrics = info.metrics?.turn_metrics ?? {};
  const metrics = Object.entries(turnMetrics)
    .map(([k, v]) => `${k}=${v}`)
    .join(" ");
  return [
    `reward ${round(reward)} (total ${round(total)})  done ${done}  success ${info.success ?? false}`,
    `parsed: format_correct=${info.format_correct ?? "?"} actions=${JSON.stringify(info.actions ?? [])}`,
    metrics ? `metrics: ${metrics}` : "",
  ]
    .filter(Boolean)
    .join("\n");
}

function round(x: number): number {
  return Math.round(x * 1e6) / 1e6;
}
