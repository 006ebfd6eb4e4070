/**
 * `vagen demo`: watch an agent learn, on a laptop CPU, in minutes.
 *
 *   1. base policy  a Qwen2.5-VL-architecture model of half a million parameters (a
 *                   million on CUDA), random from a fixed seed, with a tokenizer learned
 *                   on the task's own text
 *   2. sft          a short `vagen sft` on imperfect solver demonstrations (BFS with
 *                   random moves): it learns the answer format and something of the
 *                   task, not all of it
 *   3. rl           `vagen train` (GiGPO, GRPO, or PPO with a critic) from the supervised
 *                   policy; validation on held-out seeds before the first step, half-way
 *                   and after the last
 *
 * Everything lands in one run directory, the trainer's: config.yaml, metrics.jsonl,
 * TensorBoard events, rollouts/, checkpoints/ (so `vagen monitor` reads it), with base/
 * (the random policy) and sft/ (the warm start: its checkpoints in the trainer's format,
 * and sft/final/, a model directory `vagen eval` takes).
 * The RL phase's validation before training is the supervised policy's success rate; the
 * one after the last step is the final success rate: both are in metrics.jsonl.
 */
import { rmSync } from "node:fs";
import { join } from "node:path";
import { VagenError } from "../core/errors.ts";
import * as torch from "../torch/index.ts";
import { runSft, type SftEvent, type SftProbe } from "../sft/trainer.ts";
import type { SolverDataConfig } from "../sft/config.ts";
import { checkTrainConfig } from "../training/config.ts";
import type { TrainEvent } from "../training/events.ts";
import { runTraining } from "../training/trainer.ts";
import { demoRecipe, replyTokens, resolveRecipe, sftConfig, trainConfig, type DemoAlgorithm, type DemoRecipe } from "./recipe.ts";
import { demoTask, writeDemoBaseModel, type DemoEnv, type DemoFormat, type DemoRender, type DemoTask } from "./task.ts";
import { validate } from "./validate.ts";

export interface DemoOptions {
  env: DemoEnv;
  render: DemoRender;
  /** What a reply holds (default: the answer alone). */
  format?: DemoFormat;
  /** RL steps (default: the recipe's). */
  steps?: number;
  seed: number;
  device: string;
  algorithm: DemoAlgorithm;
  /** The run directory (created). */
  runDir: string;
  /** Replace parts of the device's recipe (tests use a smaller one). */
  recipe?: Partial<DemoRecipe>;
  signal?: AbortSignal;
}

export type DemoEvent =
  | { type: "phase"; phase: "base" | "sft" | "rl" | "done"; message: string }
  | { type: "sft"; event: SftEvent }
  /** The warm start's probe (recipe `sftStopAtSuccess`): greedy success on the probe levels after `step`. */
  | { type: "probe"; step: number; successRate: number; episodes: number; target: number }
  | { type: "train"; event: TrainEvent };

export interface DemoSummary {
  sft_success_rate: number;
  final_success_rate: number;
  seconds: number;
  run_dir: string;
  /** Seconds per phase, for the record (the machine's load shows here first). */
  phase_seconds: { base: number; sft: number; rl: number };
  parameters: number;
  env: string;
  render: DemoRender;
  format: DemoFormat;
  algorithm: DemoAlgorithm;
  rl_steps: number;
}

const ALGORITHM_NAMES: Record<DemoAlgorithm, string> = { gigpo: "GiGPO", grpo: "GRPO", ppo: "PPO with a critic", bi_level: "PPO with a critic and bi-level GAE" };

/** "512 solver episodes, 10% of moves random (safe ones)", as the demo's SFT phase line says it. */
function demonstrations(solver: SolverDataConfig): string {
  const habit = solver.env === "FrozenLake" ? "blind to holes" : "that walks through the box";
  const careless = solver.careless_episode_prob > 0 ? `${Math.round(solver.careless_episode_prob * 100)}% of them by a careless solver ${habit}, ` : "";
  const safe = solver.random_moves === "safe" ? " (safe ones: never into a hole or the edge)" : "";
  const noise = (solver.state_noise_prob ?? 0) > 0 ? `, ${Math.round(solver.state_noise_prob! * 100)}% of stated objects misplaced` : "";
  return `${solver.episodes} solver episodes, ${careless}${Math.round(solver.random_action_prob * 100)}% of moves random${safe}${noise}`;
}

/**
 * The warm start's probe: the policy as it stands, greedy on levels of the probe's own
 * seeds, in the engine at the precision RL validates in (f32); done once its success
 * reaches `target`. Each probe's summary stays under `sft/probes/step_<N>/`.
 */
function warmStartProbe(task: DemoTask, recipe: DemoRecipe, target: number, sftDir: string, device: string, onEvent: (event: DemoEvent) => void): SftProbe {
  const episodes = recipe.sftProbeEpisodes ?? 64;
  return {
    from: recipe.sftProbeFrom ?? 10,
    every: recipe.sftProbeEvery ?? 10,
    judge: async (modelDir, step) => {
      const outputDir = join(sftDir, "probes", `step_${step}`);
      const { successRate } = await validate(task, {
        modelDir,
        outputDir,
        episodes,
        device,
        dtype: "f32",
        concurrency: episodes,
        // The RL phase's prompt budget (recipe.ts: data.max_prompt_length) and one reply.
        maxSeqLen: 1024 + replyTokens(task, recipe),
        maxTokens: replyTokens(task, recipe),
        seedStart: task.probeSeedStart,
      });
      onEvent({ type: "probe", step, successRate, episodes, target });
      const done = successRate >= target;
      // A probe's episodes are 5 MB of renders; the one that ended the warm start keeps
      // them, the others their summary.json alone (twenty probes would be 100 MB).
      if (!done) rmSync(join(outputDir, task.envName.toLowerCase()), { recursive: true, force: true });
      return done;
    },
  };
}

export async function runDemo(opts: DemoOptions, onEvent: (event: DemoEvent) => void = () => {}): Promise<DemoSummary> {
  const started = performance.now();
  const clock = () => (performance.now() - started) / 1000;
  const recipe = resolveRecipe(demoRecipe(opts.device, opts.env), opts.format ?? "answer", opts.recipe);
  const task = demoTask(opts.env, opts.render, recipe.frozenLakeBoard, { levels: recipe.sokobanLevels, format: opts.format, maxTurns: recipe.sokobanMaxTurns, harness: recipe.harness, ...(recipe.sokobanCellPixels ? { cellPixels: recipe.sokobanCellPixels } : {}) });
  const steps = opts.steps ?? recipe.rlSteps;
  if (!opts.device.startsWith("cuda") && recipe.cpuThreads) torch.setNumThreads(recipe.cpuThreads);

  const baseDir = join(opts.runDir, "base");
  const { parameters, vocabSize } = await writeDemoBaseModel(baseDir, task, { seed: opts.seed, spec: recipe.spec });
  const baseSeconds = clock();
  onEvent({ type: "phase", phase: "base", message: `base policy: Qwen2.5-VL architecture, ${(parameters / 1e6).toFixed(2)}M parameters, vocabulary ${vocabSize}, random from seed ${opts.seed} -> ${baseDir}` });

  const sftSetup = sftConfig(task, recipe, { baseModelDir: baseDir, outputDir: join(opts.runDir, "sft"), seed: opts.seed, device: opts.device });
  onEvent({ type: "phase", phase: "sft", message: `sft: ${demonstrations(sftSetup.data.solver!)} on ${task.envName} (${opts.render}, ${task.format ?? "answer"})` });
  const probe = recipe.sftStopAtSuccess === undefined ? undefined : warmStartProbe(task, recipe, recipe.sftStopAtSuccess, sftSetup.output_dir, opts.device, onEvent);
  const sft = await runSft(sftSetup, (event) => onEvent({ type: "sft", event }), { ...(probe ? { probe } : {}), ...(opts.signal ? { signal: opts.signal } : {}) });
  // 130 after Ctrl-C, as shells report a SIGINT death (128 + 2).
  if (sft.interrupted) throw new VagenError(`demo: interrupted during the warm start, after supervised step ${sft.steps}`, `the run directory keeps it: ${sft.modelDir}`, 130);
  const sftSeconds = clock() - baseSeconds;

  onEvent({ type: "phase", phase: "rl", message: `rl: ${ALGORITHM_NAMES[opts.algorithm]}, ${steps} steps of ${recipe.rlBatch} x ${recipe.rlGroup} episodes from ${sft.modelDir}` });
  const checked = checkTrainConfig(
    trainConfig(task, recipe, { modelDir: sft.modelDir, outputDir: opts.runDir, seed: opts.seed, device: opts.device, steps, algorithm: opts.algorithm }),
    "demo",
  );
  const validations: { step: number; successRate: number }[] = [];
  const tag = task.envName.toLowerCase();
  const result = await runTraining(checked, {
    signal: opts.signal,
    onEvent: (event) => {
      if (event.type === "validation") validations.push({ step: event.step, successRate: event.metrics[`val/${tag}/success_rate`] ?? Number.NaN });
      onEvent({ type: "train", event });
    },
  });
  if (result.reason !== "completed") {
    // 130 after Ctrl-C, as shells report a SIGINT death (128 + 2).
    throw new VagenError(`demo: the RL phase ended early (${result.reason}) at step ${result.step}`, "the run directory keeps what finished", result.reason === "interrupted" ? 130 : 1);
  }
  const before = validations.find((v) => v.step === 0);
  const after = validations.at(-1);
  if (!before || !after || after.step === 0) throw new VagenError("demo: the RL phase did not validate before and after training");

  const seconds = clock();
  const summary: DemoSummary = {
    sft_success_rate: before.successRate,
    final_success_rate: after.successRate,
    seconds,
    run_dir: opts.runDir,
    phase_seconds: { base: baseSeconds, sft: sftSeconds, rl: seconds - baseSeconds - sftSeconds },
    parameters,
    env: task.envName,
    render: opts.render,
    format: task.format ?? "answer",
    algorithm: opts.algorithm,
    rl_steps: result.step,
  };
  onEvent({ type: "phase", phase: "done", message: `success on ${recipe.valEpisodes} held-out boards: ${before.successRate.toFixed(2)} after sft -> ${after.successRate.toFixed(2)} after rl (${seconds.toFixed(0)} s)` });
  return summary;
}
