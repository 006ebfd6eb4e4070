/**
 * Playing an env by hand (`vagen env play`): read a response per line, step, and tell
 * what happened as events (the observation, reward, metrics and how the response was
 * parsed). Drawing them in a terminal is the CLI's (src/cli/render/env-play.ts).
 */
import { createInterface } from "node:readline";
import { isResponseFormat, wrapActions } from "../_common/parsers.ts";
import type { Env, EnvInfo, Observation } from "../_common/types.ts";

/** What a view of a hand-played episode shows, in order. */
export type PlayEvent =
  /** How to play: shown first, and again on `:h`. */
  | { type: "help"; text: string }
  /** The env was reset with `seed` (at the start and on `:r`). */
  | { type: "episode_started"; seed: number; obs: Observation }
  /** The player is asked for the response of turn `turn` (1-based). */
  | { type: "awaiting_input"; turn: number }
  /** The env's system prompt, on `:s`. */
  | { type: "system_prompt"; obs: Observation }
  /** The env stepped with the player's response. */
  | { type: "stepped"; turn: number; obs: Observation; reward: number; totalReward: number; done: boolean; info: EnvInfo };

export interface PlayOptions {
  env: Env;
  seed: number;
  /** The env's response format, so bare actions (`up, left`) can be wrapped for it. */
  promptFormat?: string;
  input?: NodeJS.ReadableStream;
  onEvent: (event: PlayEvent) => void;
}

const HELP = `Type a full response, or just actions like "up, left" (wrapped in the env's format).
Commands: :r reset (next seed), :s system prompt, :h help, :q quit.`;

export async function play(options: PlayOptions): Promise<void> {
  const { env, onEvent: emit } = options;
  // Lines are read through the async iterator, which buffers them: piped input (scripts,
  // tests) arrives all at once, and readline's question() would drop the extra lines.
  const rl = createInterface({ input: options.input ?? process.stdin, crlfDelay: Infinity, terminal: false });
  const lines = rl[Symbol.asyncIterator]();
  let seed = options.seed;
  let turn = 0;
  let total = 0;

  const startEpisode = async () => {
    const { obs } = await env.reset(seed);
    turn = 0;
    total = 0;
    emit({ type: "episode_started", seed, obs });
  };

  emit({ type: "help", text: HELP });
  await startEpisode();
  try {
    for (;;) {
      emit({ type: "awaiting_input", turn: turn + 1 });
      const next = await lines.next();
      if (next.done) break;
      const input = String(next.value).trim();
      if (input === "") continue;
      if (input === ":q" || input === "quit" || input === "exit") break;
      if (input === ":h") {
        emit({ type: "help", text: HELP });
        continue;
      }
      if (input === ":s") {
        emit({ type: "system_prompt", obs: await env.systemPrompt() });
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
      emit({ type: "stepped", turn, obs: result.obs, reward: result.reward, totalReward: total, done: result.done, info: result.info });
    }
  } finally {
    rl.close();
    await env.close();
  }
}
