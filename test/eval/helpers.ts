/** Shared bits of the eval tests: temp output dirs and configs pointed at a fake server. */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { validate } from "../../src/config/index.ts";
import { EvalConfig } from "../../src/evaluation/config.ts";

export function tempDir(prefix = "vagen-eval-"): { path: string; cleanup: () => void } {
  const path = mkdtempSync(join(tmpdir(), prefix));
  return { path, cleanup: () => rmSync(path, { recursive: true, force: true }) };
}

/** Fast retry/timeouts so fault scenarios finish in milliseconds. */
export function fastModel(baseUrl: string, extra: Record<string, unknown> = {}): Record<string, unknown> {
  return {
    backend: "openai",
    base_url: baseUrl,
    model: "fake-solver",
    timeout_s: 2,
    max_retries: 6,
    min_backoff_s: 0.001,
    max_backoff_s: 0.01,
    max_retry_after_s: 0.05,
    max_concurrency: 4,
    sampling: { temperature: 0, max_tokens: 256 },
    ...extra,
  };
}

export const SOKOBAN_TEXT = { render_mode: "text", min_solution_steps: [1, 5], prompt_format: "free_think" };
export const FROZENLAKE_TEXT = { render_mode: "text", size: 4 };

export function evalConfig(outputDir: string, baseUrl: string, envs: Record<string, unknown>, model: Record<string, unknown> = {}, run: Record<string, unknown> = {}): EvalConfig {
  return validate(EvalConfig, { output_dir: outputDir, model: fastModel(baseUrl, model), run: { max_concurrent_episodes: 4, ...run }, envs });
}
