/**
 * Validation as `vagen eval` does it: a model directory run in-process by the engine on
 * held-out seeds, greedy, every episode written under `outputDir` (so the folder is an
 * ordinary eval output: `vagen eval` resumes it, `vagen sft` can learn from it).
 */
import * as v from "valibot";
import { createEnv } from "../../envs/registry.ts";
import { createClient } from "../clients/config.ts";
import { EvalConfig } from "../evaluation/config.ts";
import type { EvalEventListener } from "../evaluation/events.ts";
import { buildEvalPlan } from "../evaluation/plan.ts";
import { runEvaluation } from "../evaluation/runner.ts";
import type { DemoTask } from "./task.ts";

export interface ValidationOptions {
  modelDir: string;
  outputDir: string;
  episodes: number;
  device: string;
  /** Tokens one answer may take (answers are a handful of tokens). */
  maxTokens: number;
  /** Sampling temperature (unset: 0, greedy). */
  temperature?: number;
  /** The first level's seed (unset: the task's validation seeds). */
  seedStart?: number;
  /** The engine's compute dtype (unset: the engine's default, bf16 on CUDA). */
  dtype?: "f32" | "bf16";
  /** Episodes run at once (unset: 16). */
  concurrency?: number;
  /** Tokens one sequence may hold (unset: the engine's 8,192; the KV cache is sized by it). */
  maxSeqLen?: number;
  onEvent?: EvalEventListener;
}

/** The eval config validation runs: the task's env on its validation seeds (or others), greedy unless a temperature is given. */
export function validationConfig(task: DemoTask, opts: Omit<ValidationOptions, "onEvent">): EvalConfig {
  return v.parse(EvalConfig, {
    output_dir: opts.outputDir,
    model: { backend: "engine", model_dir: opts.modelDir, engine: { device: opts.device, ...(opts.dtype ? { dtype: opts.dtype } : {}), ...(opts.maxSeqLen ? { max_seq_len: opts.maxSeqLen, max_slots: opts.concurrency ?? 16 } : {}) }, sampling: { temperature: opts.temperature ?? 0, max_tokens: opts.maxTokens } },
    run: { max_concurrent_episodes: opts.concurrency ?? 16, resume: false },
    envs: {
      [task.envName.toLowerCase()]: {
        name: task.envName,
        config: task.envConfig,
        episodes: opts.episodes,
        seed_start: opts.seedStart ?? task.valSeedStart,
        max_turns: task.maxTurns,
        harness: task.harness,
      },
    },
  });
}

/** Run validation; returns the success rate over the episodes. */
export async function validate(task: DemoTask, opts: ValidationOptions): Promise<{ successRate: number; episodes: number }> {
  const config = validationConfig(task, opts);
  const plan = buildEvalPlan(config, "demo validation");
  const client = createClient(config.model);
  try {
    const result = await runEvaluation(plan, { client, createEnv, onEvent: opts.onEvent });
    const env = Object.values(result.summary.envs)[0]!;
    return { successRate: env.success_rate, episodes: env.episodes };
  } finally {
    await client.close?.();
  }
}
