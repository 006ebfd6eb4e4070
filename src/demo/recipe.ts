/**
 * The demo's recipe: how big the policy is, how much supervised warm-start it gets, and
 * the RL run after it, per device. Every phase runs the task's harness, observation_only
 * (src/harness/observation-only.ts: each turn the policy sees the current board alone, no system
 * prompt, no history), which makes a row per turn; so every estimator here is one that
 * stitches an episode's rows back together (verl's per-row `grpo` and `gae` are refused
 * when episodes span rows). Only GiGPO tells the turns of an episode apart:
 *   gigpo            the episode's outcome against its group's, plus each turn's
 *                    discounted return against the other turns taken from the same
 *                    board state
 *   trajectory_grpo  (`grpo` here) one advantage for every turn of an episode: its
 *                    outcome against its group's, divided by the group's spread
 *   default_gae      (`ppo`) a critic, the episode's reward on its last token and
 *                    token-level GAE back through all its turns
 * The numbers were tuned on a 2-core CPU so the whole demo (SFT, RL, validation) fits in
 * minutes; docs/demo.md has the measurements.
 */
import * as v from "valibot";
import type { SftConfig } from "../sft/config.ts";
import { TrainConfig } from "../training/config.ts";
import { DEMO_MODEL_SPEC, type TinyQwenSpec } from "./model-dir.ts";
import { demoSolverData, type DemoTask, type FrozenLakeBoard } from "./task.ts";

/** The RL algorithms the demo offers, and the estimator each runs. */
export const DEMO_ALGORITHMS = { gigpo: "gigpo", grpo: "trajectory_grpo", ppo: "default_gae" } as const;
export type DemoAlgorithm = keyof typeof DEMO_ALGORITHMS;

export interface DemoRecipe {
  spec: TinyQwenSpec;
  /** The FrozenLake boards of every phase (unset: 4x4 with p 0.8). */
  frozenLakeBoard?: FrozenLakeBoard;
  /**
   * Solver episodes for the warm start, the share of them played by a careless solver
   * (FrozenLake: blind to holes) and the share of moves that are random.
   */
  sftEpisodes: number;
  sftCarelessProb: number;
  sftRandomActionProb: number;
  /** What random moves are drawn from: `any` move, or `safe` ones (never into a hole or the edge). */
  sftRandomMoves: "any" | "safe";
  sftEpochs: number;
  /** Stop the warm start once its mean training loss is below this (unset: after the epochs). */
  sftStopBelowLoss?: number;
  sftLr: number;
  /** Label smoothing of the supervised loss (unset: none). */
  sftLabelSmoothing?: number;
  /** RL: optimizer steps, env instances per step and rollouts per instance (GRPO's group). */
  rlSteps: number;
  rlBatch: number;
  rlGroup: number;
  rlLr: number;
  /** Held-out validation episodes (before RL, and at the end). */
  valEpisodes: number;
  /** Tokens one answer may take. */
  maxAnswerTokens: number;
  /**
   * libtorch's CPU threads for the run (unset: libtorch's default). The CPU recipe's
   * matrices are so small that a second thread costs more in handoffs than it computes:
   * measured on 2 cores, a supervised step took 0.13 s on one thread and 0.27 s on two.
   */
  cpuThreads?: number;
}

/**
 * The CPU recipe: a ~0.46M-parameter policy (a 64-wide, 3-layer decoder; the step time of
 * a 2-core CPU buys more from steps than from width), initialised at 0.1 rather than
 * Qwen's 0.02, which at this width leaves attention near uniform for hundreds of steps;
 * on 3x3 boards where a tenth of the tiles are holes (84 x 84 renders, one image token a
 * cell). The warm start imitates BFS demonstrations with a tenth of the moves random and
 * stops early, once its mean training loss is below 0.22: it answers in the format and
 * has begun to head for the goal, and fails half to three quarters of the held-out
 * boards by pushing into the edge, wandering or stepping into a hole (0.27-0.46 over four
 * seeds). A fixed number of epochs gave warm starts from 0.15 to 0.91 by seed (the step
 * at which imitation starts to read the goal's place varies that much); stopping at 0.18
 * gave 0.50-0.75, which left RL as little as 0.17 to add. GiGPO then compares the moves
 * tried from the same board state and lifts the policy to 0.90-0.91 in 200 steps, at
 * least 0.44 on every seed (docs/demo.md).
 *
 * Why 3x3: on the 4x4 boards of VAGEN's default (a fifth of the tiles holes) this policy
 * cannot learn to see a hole next to the player fast enough; a long supervised phase
 * reaches 0.87 and RL from any warm start ends at 0.72-0.90 (docs/demo.md).
 */
export const CPU_RECIPE: DemoRecipe = {
  spec: {
    ...DEMO_MODEL_SPEC,
    textHidden: 64,
    textLayers: 3,
    textHeads: 2,
    textKvHeads: 1,
    textIntermediate: 192,
    initializerRange: 0.1,
  },
  frozenLakeBoard: { size: 3, p: 0.9 },
  sftEpisodes: 512,
  sftCarelessProb: 0,
  sftRandomActionProb: 0.1,
  sftRandomMoves: "any",
  sftEpochs: 6,
  sftStopBelowLoss: 0.22,
  sftLr: 2e-3,
  rlSteps: 200,
  rlBatch: 8,
  rlGroup: 8,
  rlLr: 1e-3,
  valEpisodes: 128,
  maxAnswerTokens: 10,
  cpuThreads: 1,
};

/**
 * On CUDA: the same task with a 2.5x larger policy (a 128-wide, 4-layer decoder, 1.18M
 * parameters). It learns the boards faster: 3 supervised epochs already reach 0.91 and 2
 * reach 0.62-0.92 by seed, so its warm start is a single epoch (0.12-0.13: the format,
 * hardly the task) and RL does the rest (0.92-0.93 on an H200 in under six minutes,
 * docs/demo.md).
 */
export const CUDA_RECIPE: DemoRecipe = {
  ...CPU_RECIPE,
  spec: { ...CPU_RECIPE.spec, textHidden: 128, textLayers: 4, textHeads: 4, textKvHeads: 2, textIntermediate: 384 },
  sftEpochs: 1,
  sftStopBelowLoss: undefined,
  rlSteps: 150,
  rlLr: 5e-4,
  cpuThreads: undefined,
};

export function demoRecipe(device: string): DemoRecipe {
  return device.startsWith("cuda") ? CUDA_RECIPE : CPU_RECIPE;
}

/** The supervised phase as a `vagen sft` config. */
export function sftConfig(task: DemoTask, recipe: DemoRecipe, opts: { baseModelDir: string; outputDir: string; seed: number; device: string }): SftConfig {
  return {
    model_dir: opts.baseModelDir,
    output_dir: opts.outputDir,
    seed: opts.seed,
    device: opts.device,
    dtype: "f32",
    data: {
      layout: task.harness,
      solver: demoSolverData(task, recipe.sftEpisodes, recipe.sftRandomActionProb, { carelessEpisodeProb: recipe.sftCarelessProb, randomMoves: recipe.sftRandomMoves }),
      eval_dirs: [],
      // Failed demonstrations are kept too: they are part of what makes the warm start imperfect.
      only_success: false,
    },
    optim: { lr: recipe.sftLr, weight_decay: 0, grad_clip: 1.0, warmup_steps: 5, schedule: "cosine" },
    train: { epochs: recipe.sftEpochs, batch_size: 32, micro_batch_size: 32, max_steps: 0, save_every_epoch: false, freeze_vision_tower: true, label_smoothing: recipe.sftLabelSmoothing ?? 0, stop_below_loss: recipe.sftStopBelowLoss ?? 0 },
  };
}

/**
 * The RL phase as a `vagen train` config: the chosen algorithm (GiGPO, GRPO over whole
 * episodes, or PPO with a critic) on fresh training seeds, under the task's harness
 * (observation_only: each turn sees the current board alone, as in the warm start), with
 * greedy validation (`rollout.val_kwargs`' default: temperature 0, one rollout) on the
 * held-out seeds before the first step, half-way and after the last.
 */
export function trainConfig(
  task: DemoTask,
  recipe: DemoRecipe,
  opts: { modelDir: string; outputDir: string; seed: number; device: string; steps: number; algorithm: DemoAlgorithm },
): TrainConfig {
  const env = {
    name: task.envName,
    max_turns: task.maxTurns,
    response_length_per_turn: recipe.maxAnswerTokens,
    config: task.envConfig,
  };
  const tag = task.envName.toLowerCase();
  // A row per turn, so a step's row count varies with its episodes' lengths: micro-batches
  // by a token budget, not by count.
  // The vision tower stays as initialised in every phase (see sftConfig's freeze_vision_tower).
  const update = { ppo_mini_batch_size: recipe.rlBatch, use_dynamic_bsz: true, ppo_max_token_len: 4096, ppo_epochs: 1, freeze_vision_tower: true };
  return v.parse(TrainConfig, {
    model: { model_dir: opts.modelDir, device: opts.device.startsWith("cuda") ? "cuda" : "cpu", dtype: "f32" },
    data: {
      train_batch_size: recipe.rlBatch,
      max_prompt_length: 1024,
      max_response_length: 64,
      train: { [tag]: { ...env, n_envs: 4096, seed: [task.trainSeedStart, task.trainSeedStart + 4095, 1] } },
      val: { [tag]: { ...env, n_envs: recipe.valEpisodes, seed: [task.valSeedStart, task.valSeedStart + recipe.valEpisodes - 1, 1] } },
    },
    // One update per step on exactly what was sampled: the engine's log-probs are the old ones.
    rollout: { n: recipe.rlGroup, temperature: 1.0, use_engine_logprobs: true },
    algorithm:
      opts.algorithm === "gigpo"
        ? // GiGPO as its authors' scripts run it (gamma 0.95, omega 1; vagen's default gamma
          // is 1): a turn that walks into a hole is told
          // apart from the other moves tried on the same board. Advantages are centred, not
          // divided by the group's spread: dividing blows the small return differences of two
          // safe paths (0.95^3 against 0.95^5) up to the size of a fall into a hole.
          { adv_estimator: "gigpo", gamma: 0.95, step_advantage_w: 1.0, gigpo_mode: "mean_norm" }
        : { adv_estimator: DEMO_ALGORITHMS[opts.algorithm], gamma: 1.0, lam: 1.0 },
    // Cosine decay to zero over the run: at a constant lr the late steps' noise undid part
    // of the lift (docs/demo.md).
    actor: { optim: { lr: recipe.rlLr, weight_decay: 0, warmup_style: "cosine", lr_warmup_steps: 0 }, ...update, entropy_coeff: 0 },
    critic: { optim: { lr: 1e-3, weight_decay: 0 }, ...update },
    trainer: {
      total_steps: opts.steps,
      save_freq: 0,
      // Mid-run and at the end (validation also runs before the first step, see below).
      test_freq: Math.max(1, Math.ceil(opts.steps / 2)),
      val_before_train: true,
      output_dir: opts.outputDir,
      resume: "never",
      harness: task.harness,
      seed: opts.seed,
      log_episodes: 4,
      keep_checkpoints: 1,
      save_best_actor: false,
      watchdog_s: 0,
    },
  });
}
