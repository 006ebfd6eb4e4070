/**
 * Playing an env by hand in the terminal (`vagen env play`): show the observation (text,
 * and images as half-block colour pixels), read a response, step, show reward, metrics
 * and how the response was parsed.
 */
import { createInterface } from "node:readline";
import { isResponseFormat, wrapActions } from "../_common/parsers.ts";
import type { Env, EnvInfo, Observation } from "../_common/types.ts";
import { halfBlockLines } from "./terminal-image.ts";

export interface PlayOptions {
  env: Env;
  seed: number;
  /** The env's response format, so bare actions (`up, left`) can be wrapped for it. */
  promptFormat?: string;
  input?: NodeJS.ReadableStream;
  output?: NodeJS.WritableStream;
  /** Columns available for images; defaults to the terminal width. */
  columns?: number;
  color?: boolean;
}

const HELP = `Type a full response, or just actions like "up, left" (wrapped in the env's format).
Commands: :r reset (next seed), :s system prompt, :h help, :q quit.`;

export async function play(options: PlayOptions): Promise<void> {
  const output = options.output ?? process.stdout;
  const write = (text = "") => output.write(`${text}\n`);
  const columns = Math.max(16, Math.min(options.columns ?? (process.stdout.columns || 80), 128));
  const color = options.color ?? true;
  // Lines are read through the async iterator, which buffers them: piped input (scripts,
  // tests) arrives all at once, and readline's question() would drop the extra lines.
  const rl = createInterface({ input: options.input ?? process.stdin, crlfDelay: Infinity, terminal: false });
  const lines = rl[Symbol.asyncIterator]();
  const { env } = options;
  let seed = options.seed;
  let turn = 0;
  let total = 0;

  const show = (obs: Observation) => {
    write(obs.text.trimEnd());
    if (color) for (const image of obs.images) for (const line of halfBlockLines(image, Math.min(columns, 64))) write(line);
    else for (const image of obs.images) write(`[image ${image.width}x${image.height}]`);
  };
  const startEpisode = async () => {
    const { obs } = await env.reset(seed);
    turn = 0;
    total = 0;
    write(`\n=== seed ${seed} ===`);
    show(obs);
  };

  write(HELP);
  await startEpisode();
  try {
    for (;;) {
      output.write(`\n[turn ${turn + 1}] > `);
      const next = await lines.next();
      if (next.done) break;
      const input = String(next.value).trim();
      if (input === "") continue;
      if (input === ":q" || input === "quit" || input === "exit") break;
      if (input === ":h") {
        write(HELP);
        continue;
      }
      if (input === ":s") {
        write((await env.systemPrompt()).text);
        continue;
      }
      if (input === ":r") {
        seed += 1;
        await startEpisode();
        continue;
      }
      const response = !input.includes("<") && options.promptFormat && isResponseFormat(options.promptFormat) ? wrapActions(options.promptFormat, input) : input;
      const result = await env.step(response);
      turn++;
      total += result.reward;
      show(result.obs);
      write(summary(result.reward, total, result.done, result.info));
      if (result.done) write(result.info.success ? "Solved! (:r for the next seed, :q to quit)" : "Episode over. (:r for the next seed, :q to quit)");
    }
  } finally {
    rl.close();
    await env.close();
  }
}

function summary(reward: number, total: number, done: boolean, info: EnvInfo): string {
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
