/**
 * Scripted replay: reset an env with a seed, feed it one response per input line (each a
 * JSON string), and emit one JSON object per event. Used by `vagen env replay`.
 */
import { createReadStream, existsSync, mkdirSync, writeFileSync } from "node:fs";
import { createInterface } from "node:readline";
import { join } from "node:path";
import { VagenError } from "../../src/core/errors.ts";
import { encodePng } from "../../src/core/png.ts";
import type { Env, Observation } from "../_common/types.ts";

export interface ReplayOptions {
  env: Env;
  seed: number;
  /** Response lines; blank lines are skipped. */
  lines: AsyncIterable<string> | Iterable<string>;
  /** Where to save observation images as PNG, if anywhere. */
  imagesDir?: string;
  emit: (event: Record<string, unknown>) => void;
}

export async function replay(options: ReplayOptions): Promise<{ steps: number; totalReward: number; done: boolean }> {
  const { env, seed, emit, imagesDir } = options;
  if (imagesDir) mkdirSync(imagesDir, { recursive: true });
  const describe = (obs: Observation, label: string): Record<string, unknown> => {
    const out: Record<string, unknown> = { text: obs.text, images: obs.images.length };
    if (imagesDir && obs.images.length > 0) {
      out.image_paths = obs.images.map((img, i) => {
        const path = join(imagesDir, `${label}_${i}.png`);
        writeFileSync(path, encodePng(img));
        return path;
      });
    }
    return out;
  };

  const reset = await env.reset(seed);
  emit({ type: "reset", seed, obs: describe(reset.obs, "reset"), info: reset.info });
  let steps = 0;
  let totalReward = 0;
  let done = false;
  let lineNumber = 0;
  for await (const line of options.lines) {
    lineNumber++;
    if (line.trim() === "") continue;
    let response: unknown;
    try {
      response = JSON.parse(line);
    } catch {
      throw new VagenError(`responses line ${lineNumber}: not valid JSON`, 'each line must be a JSON string, e.g. "<think>...</think><answer>Up</answer>"');
    }
    if (typeof response !== "string") throw new VagenError(`responses line ${lineNumber}: expected a JSON string, got ${typeof response}`);
    steps++;
    const result = await env.step(response);
    totalReward += result.reward;
    done = result.done;
    emit({
      type: "step",
      step: steps,
      response,
      obs: describe(result.obs, `step${String(steps).padStart(3, "0")}`),
      reward: result.reward,
      done: result.done,
      info: result.info,
    });
  }
  return { steps, totalReward, done };
}

/** Lines of a file, or of stdin for `-`, read as they arrive. */
export async function* readLines(source: string): AsyncGenerator<string> {
  if (source !== "-" && !existsSync(source)) throw new VagenError(`responses file "${source}" does not exist`);
  const input = source === "-" ? process.stdin : createReadStream(source, "utf8");
  for await (const line of createInterface({ input, crlfDelay: Infinity })) yield line;
}
