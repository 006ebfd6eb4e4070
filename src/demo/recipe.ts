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
 *   bi_level_gae     (`bi_level`, VAGEN-Full's) a critic, GAE over turns (discounted
 *                    once a turn) mixed with token-level GAE; with the wm format's
 *                    state rewards on their sections' tokens
 * The numbers were tuned on a 2-core CPU so the whole demo (SFT, RL, validation) fits in
 * minutes; docs/demo.md has the measurements.
 */
import * as v from "valibot";
import type { SftConfig } from "../sft/config.ts";
import { TrainConfig } from "../training/config.ts";
import { DEMO_MODEL_SPEC, type TinyQwenSpec } from "./model-dir.ts";
import { demoSolverData, type DemoEnv, type DemoFormat, type DemoHarness, type DemoTask, type FrozenLakeBoard, type SokobanLevels } from "./task.ts";

/** The RL algorithms the demo offers, and the estimator each runs. */
export const DEMO_ALGORITHMS = { gigpo: "gigpo", grpo: "trajectory_grpo", ppo: "default_gae", bi_level: "bi_level_gae" } as const;
export type DemoAlgorithm = keyof typeof DEMO_ALGORITHMS;

export interface DemoRecipe {
  spec: TinyQwenSpec;
  /** The FrozenLake boards of every phase (unset: 4x4 with p 0.8). */
  frozenLakeBoard?: FrozenLakeBoard;
  /** The Sokoban levels of every phase (unset: VAGEN's, 6x6 with one box, solved in 1-5 moves) and the turn limit. */
  sokobanLevels?: SokobanLevels;
  sokobanMaxTurns?: number;
  /** Pixels a Sokoban cell is resized to (unset: 14, one vision patch a cell; 28: one merged image token a cell). */
  sokobanCellPixels?: 14 | 28;
  /** What the policy sees each turn (unset: observation_only, the current image alone). */
  harness?: DemoHarness;
  /** wm format: the chance that a demonstration's stated object is misplaced on one axis (src/sft/reasoning.ts). */
  sftStateNoiseProb?: number;
  /**
   * wm format: what a perfect `<perception>` and a perfect `<prediction>` each pay per turn
   * (the state rewards, Sokoban's exact reader, main's grouped F1 above its chance floor).
   */
  stateReward?: number;
  /**
   * wm format: how an episode's state rewards are paid (default `per_turn`, every turn's in
   * full; `episode_mean`, each turn's divided by the episode's turns, as VAGEN main's latest
   * bi-level script does, so a long episode earns no more of them than a short one).
   */
  stateRewardAggregation?: "per_turn" | "episode_mean";
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
  /**
   * Stop the warm start at the first probe whose greedy success on `sftProbeEpisodes`
   * levels of its own (seeds neither the demonstrations', RL's nor validation's) reaches
   * this (unset: no probe). Imitation sits at chance for a number of steps that varies by
   * seed and then climbs within tens of steps, so neither a step count nor a loss gives
   * the same warm start from seed to seed (docs/demo.md); a success rate does.
   */
  sftStopAtSuccess?: number;
  /** Probe after step `sftProbeFrom` and every `sftProbeEvery` steps after it (unset: 10 and 10), on `sftProbeEpisodes` levels (unset: 64). */
  sftProbeFrom?: number;
  sftProbeEvery?: number;
  sftProbeEpisodes?: number;
  sftLr: number;
  /** Label smoothing of the supervised loss (unset: none). */
  sftLabelSmoothing?: number;
  /** RL: optimizer steps, env instances per step and rollouts per instance (GRPO's group). */
  rlSteps: number;
  rlBatch: number;
  rlGroup: number;
  rlLr: number;
  /** Whether the vision tower and merger stay as initialised in the warm start, and in RL (unset: true). */
  sftFreezeVisionTower?: boolean;
  rlFreezeVisionTower?: boolean;
  /** Steps that train the critic alone before the actor's first update (algorithms with a critic; unset: 0). */
  rlCriticWarmup?: number;
  /** Validate every this many RL steps (unset: half-way and at the end). */
  rlTestFreq?: number;
  /** Env instances per actor update (unset: rlBatch, one update a step); rlBatch / rlMiniBatch updates a step. */
  rlMiniBatch?: number;
  /**
   * Passes over a step's rollouts (PPO's epochs; unset: 1, verl's). A rollout costs seconds
   * and an update of this policy a fraction of one, so more passes take more from each
   * rollout; past the first the clipped ratio bounds how far they move the policy.
   */
  rlPpoEpochs?: number;
  /** Env keys the RL phase sets over the task's (its rewards: `format_reward`, `success_reward`); unset: the env's defaults. */
  rlEnvConfig?: Record<string, unknown>;
  /** Tokens a training micro-batch may hold (unset: 4096; a GPU takes far more of the small policy's at once). */
  rlMaxTokenLen?: number;
  /**
   * How the RL rollouts sample (unset: temperature 1, top_p 1, verl's defaults, which
   * VAGEN main keeps; the paper trained at 0.7 and 0.95). The trainer's log-probs divide
   * by the temperature, as verl's do.
   */
  rlSampling?: { temperature: number; top_p: number };
  /** The actor's entropy bonus (unset: 0, verl's and VAGEN's). */
  rlEntropyCoeff?: number;
  /**
   * PPO's upper clip on the ratio (unset: the symmetric 0.2, verl's). DAPO's clip-higher
   * (0.28) lets a token the policy finds unlikely gain more in one update, against the
   * entropy collapse that stalls RL once most groups agree.
   */
  rlClipRatioHigh?: number;
  /** GiGPO's omega, the step-level advantage's weight against the episode's (unset: 1, its authors'). */
  rlStepAdvantageWeight?: number;
  /** Held-out validation episodes (before RL, and at the end). */
  valEpisodes: number;
  /**
   * How validation samples (unset: greedy, verl's `val_kwargs` default, which VAGEN main
   * keeps; the paper evaluated at temperature 0.7, top_p 0.95).
   */
  valSampling?: { temperature: number; top_p: number };
  /** Tokens one answer may take, per format (a reasoning reply is longer). */
  maxAnswerTokens: number;
  maxFreeThinkTokens?: number;
  maxWmTokens?: number;
  /**
   * libtorch's CPU threads for the run (unset: libtorch's default). The CPU recipe's
   * matrices are so small that a second thread costs more in handoffs than it computes:
   * measured on 2 cores, a supervised step took 0.13 s on one thread and 0.27 s on two.
   */
  cpuThreads?: number;
  /**
   * Parts of the recipe that differ by format, applied over it (and under what a caller
   * overrides): a wm reply is 67 tokens to an answer's 6, so its warm start and its state
   * rewards are set apart.
   */
  formatOverrides?: Partial<Record<DemoFormat, Partial<Omit<DemoRecipe, "formatOverrides">>>>;
  /** The format `vagen demo` runs when `--format` is not given (answer when unset). */
  defaultFormat?: DemoFormat;
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

/**
 * Sokoban on the CPU: the FrozenLake recipe's policy on 6x6 rooms with one box whose
 * levels are solved in one to three moves (`min_solution_steps: [1, 3]`; VAGEN's
 * generator then gives 1.45 moves on average), six turns of one move each. A 6x6 render
 * is resized to 84 x 84, one vision patch a cell (task.ts). The warm start imitates 2048
 * BFS episodes with a tenth of the moves random and stops once its mean training loss is
 * below 0.18 (130-330 steps): imitation sits at chance on the move for 100-150 steps, then
 * starts to read where the box is, and stopping on the way down leaves a warm start that
 * solves 0.58-0.78 of the held-out levels. The vision tower learns in both phases, and RL
 * pays no per-turn format reward; GiGPO at lr 3e-4 then lifts every seed by 0.13-0.21 in
 * 100 steps, to 0.79-0.93 (docs/demo.md: the greedy warm start's failures are moves into a
 * wall repeated to the turn limit, or back and forth, which the format reward paid for).
 * The step at which imitation starts to read the room varies by seed, as on FrozenLake.
 * wm: a fifth of the stated objects misplaced in the demonstrations, 0.1 per perfect
 * section (above main's chance floor), so the state rewards have something to improve.
 * The loss threshold was measured on answers only; a wm reply's loss falls below it
 * within 50 steps, on its template, before the move is learned (docs/demo.md).
 */
export const SOKOBAN_CPU_RECIPE: DemoRecipe = {
  ...CPU_RECIPE,
  frozenLakeBoard: undefined,
  sokobanLevels: { dimRoom: [6, 6], numBoxes: 1, minSolutionSteps: [1, 3] },
  sokobanMaxTurns: 6,
  sftStateNoiseProb: 0.2,
  stateReward: 0.1,
  sftEpisodes: 2048,
  sftStopBelowLoss: 0.18,
  // The vision tower and merger learn in both phases: with them frozen at their random
  // initialisation, RL lifted the greedy policy by 0.00-0.12 in 100 steps; trained, by
  // 0.17-0.18 in 50 (docs/demo.md).
  sftFreezeVisionTower: false,
  rlFreezeVisionTower: false,
  // No per-turn format reward in RL: VAGEN main pays 0.1 for every executed action, a move
  // into a wall included, so walking into a wall for the rest of the episode earned nearly
  // what solving did; the greedy warm start's failures are exactly such loops.
  rlEnvConfig: { format_reward: 0 },
  rlLr: 3e-4,
  rlSteps: 100,
  rlTestFreq: 25,
  maxFreeThinkTokens: 24,
  maxWmTokens: 96,
};

/**
 * Sokoban on CUDA: VAGEN's levels (6x6, one box, one to five moves), nine turns, the CUDA
 * policy (1.18M parameters) with what lifted the CPU recipe (the vision tower trained in
 * both phases, no per-turn format reward in RL) and what the GPU's batch affords: one
 * merged image token a cell (28 px), 32 levels x 8 a step, GiGPO's step part weighted 3,
 * lr 2e-4, micro-batches of 32,768 tokens, and four passes over each step's rollouts (PPO
 * epochs: a rollout costs seconds, a pass over it a fraction of one).
 *
 * The warm start imitates 2048 demonstrations for four epochs, to convergence, and 70% of
 * them come from the careless solver (src/sft/episodes.ts: the careful solver's next push,
 * walked to straight through the box where a shortest walk crosses it, which fails 166 of
 * 400 of these levels). Imitation learns to read the room (on the careful solver alone the
 * same four epochs reach 0.99) and, where the two solvers part, takes the careless move
 * seven times in ten: greedy, the warm start walks into the box and solves about two
 * thirds of the levels; sampled, it tries the careful move often enough for GiGPO's groups
 * to tell the two apart. RL then unlearns the habit from outcomes alone (docs/demo.md, seeds
 * 0-2 on an H200: free_think 0.66 -> 0.98-0.99 in 150 steps, wm 0.66 -> 0.96-1.00 in 100,
 * answers only 0.66 -> 0.73-0.95). Ending the warm start early instead (a probe at 0.45)
 * left the room half read, and RL, which teaches reading far more slowly than imitation,
 * stopped at 0.73-0.76 even over 400 steps.
 *
 * wm: 0.02 a perfect section (at 0.1, nine turns of state rewards, up to 1.8, outweighed
 * solving, 1.0, and GiGPO learned to describe the room and not finish), rollouts sampled
 * at the paper's temperature 0.7 and top_p 0.95 (at 1.0 a 68-token reply garbles often
 * enough that sampled success sat 0.16 below greedy), two passes a step (four raised its
 * entropy and lowered success) and 100 steps (its steps are about twice as long).
 */
export const SOKOBAN_CUDA_RECIPE: DemoRecipe = {
  ...CUDA_RECIPE,
  frozenLakeBoard: undefined,
  sokobanLevels: { dimRoom: [6, 6], numBoxes: 1, minSolutionSteps: [1, 5] },
  sokobanMaxTurns: 9,
  sokobanCellPixels: 28,
  sftStateNoiseProb: 0.2,
  stateReward: 0.1,
  sftEpisodes: 2048,
  sftCarelessProb: 0.7,
  sftEpochs: 4,
  sftFreezeVisionTower: false,
  rlFreezeVisionTower: false,
  rlEnvConfig: { format_reward: 0 },
  rlStepAdvantageWeight: 3,
  rlSteps: 150,
  rlBatch: 32,
  rlGroup: 8,
  rlLr: 2e-4,
  rlTestFreq: 25,
  rlMaxTokenLen: 32_768,
  rlPpoEpochs: 4,
  maxFreeThinkTokens: 24,
  maxWmTokens: 96,
  formatOverrides: { wm: { stateReward: 0.02, rlPpoEpochs: 2, rlSteps: 100, rlSampling: { temperature: 0.7, top_p: 0.95 } } },
  // VAGEN's Sokoban default, and the format this recipe lifts furthest (0.96-1.00); the CPU
  // recipe's wm warm start does not learn the move in minutes, so it keeps answers.
  defaultFormat: "wm",
};

/**
 * The recipe a run uses: `base`, its format's overrides over it, `overrides` (a caller's:
 * bench/demo/lift.ts, tests) over both.
 */
export function resolveRecipe(base: DemoRecipe, format: DemoFormat, overrides: Partial<DemoRecipe> = {}): DemoRecipe {
  const merged = { ...base, ...overrides };
  return { ...merged, ...merged.formatOverrides?.[format], ...overrides };
}

export function demoRecipe(device: string, env: DemoEnv = "frozenlake"): DemoRecipe {
  const cuda = device.startsWith("cuda");
  if (env === "sokoban") return cuda ? SOKOBAN_CUDA_RECIPE : SOKOBAN_CPU_RECIPE;
  return cuda ? CUDA_RECIPE : CPU_RECIPE;
}

/** Tokens one reply may take under the task's format. */
export function replyTokens(task: DemoTask, recipe: DemoRecipe): number {
  if (task.format === "free_think") return recipe.maxFreeThinkTokens ?? 24;
  if (task.format === "wm") return recipe.maxWmTokens ?? 96;
  return recipe.maxAnswerTokens;
}

/**
 * A training row's response tokens. A row per turn holds one reply (twice its limit, for
 * the end-of-turn token and room). observation_history keeps the episode in one row: every
 * turn's reply, then the next image (one token per 28 x 28 pixels after the merger) in
 * its framing.
 */
export function responseBudget(task: DemoTask, recipe: DemoRecipe): number {
  const reply = replyTokens(task, recipe);
  if (task.harness === "observation_only") return Math.max(64, 2 * reply);
  const imageTokens = Math.ceil(task.maxPixels / (28 * 28));
  const framing = 16;
  return task.maxTurns * (reply + imageTokens + framing);
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
      solver: demoSolverData(task, recipe.sftEpisodes, recipe.sftRandomActionProb, {
        carelessEpisodeProb: recipe.sftCarelessProb,
        randomMoves: recipe.sftRandomMoves,
        stateNoiseProb: recipe.sftStateNoiseProb,
      }),
      eval_dirs: [],
      // Failed demonstrations are kept too: they are part of what makes the warm start imperfect.
      only_success: false,
    },
    optim: { lr: recipe.sftLr, weight_decay: 0, grad_clip: 1.0, warmup_steps: 5, schedule: "cosine" },
    train: { epochs: recipe.sftEpochs, batch_size: 32, micro_batch_size: 32, max_steps: 0, save_every_epoch: false, freeze_vision_tower: recipe.sftFreezeVisionTower ?? true, label_smoothing: recipe.sftLabelSmoothing ?? 0, stop_below_loss: recipe.sftStopBelowLoss ?? 0 },
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
    response_length_per_turn: replyTokens(task, recipe),
    config: { ...task.envConfig, ...recipe.rlEnvConfig, ...(task.format === "wm" ? { state_reward: stateRewardConfig(recipe.stateReward ?? 0.1, recipe.stateRewardAggregation) } : {}) },
  };
  const tag = task.envName.toLowerCase();
  // A row per turn, so a step's row count varies with its episodes' lengths: micro-batches
  // by a token budget, not by count.
  // The vision tower stays as initialised unless the recipe trains it (rlFreezeVisionTower).
  const update = { ppo_mini_batch_size: recipe.rlMiniBatch ?? recipe.rlBatch, use_dynamic_bsz: true, ppo_max_token_len: recipe.rlMaxTokenLen ?? 4096, ppo_epochs: recipe.rlPpoEpochs ?? 1, freeze_vision_tower: recipe.rlFreezeVisionTower ?? true };
  return v.parse(TrainConfig, {
    model: { model_dir: opts.modelDir, device: opts.device.startsWith("cuda") ? "cuda" : "cpu", dtype: "f32" },
    data: {
      train_batch_size: recipe.rlBatch,
      max_prompt_length: 1024,
      max_response_length: responseBudget(task, recipe),
      train: { [tag]: { ...env, n_envs: 4096, seed: [task.trainSeedStart, task.trainSeedStart + 4095, 1] } },
      val: { [tag]: { ...env, n_envs: recipe.valEpisodes, seed: [task.valSeedStart, task.valSeedStart + recipe.valEpisodes - 1, 1] } },
    },
    // One update per step on exactly what was sampled: the engine's log-probs are the old
    // ones. Several updates a step need the old log-probs from a trainer forward.
    rollout: {
      n: recipe.rlGroup,
      temperature: recipe.rlSampling?.temperature ?? 1.0,
      top_p: recipe.rlSampling?.top_p ?? 1.0,
      use_engine_logprobs: (recipe.rlMiniBatch ?? recipe.rlBatch) === recipe.rlBatch && (recipe.rlPpoEpochs ?? 1) === 1 && recipe.rlSampling === undefined,
      ...(recipe.valSampling ? { val_kwargs: { ...recipe.valSampling, n: 1 } } : {}),
    },
    algorithm:
      opts.algorithm === "bi_level"
        ? // VAGEN-Full's estimator as main's scripts run it (gamma 1, a turn discounted once).
          { adv_estimator: "bi_level_gae", gamma: 1.0, gamma_turn: 0.95, lambda_turn: 0.95, lambda_token: 1.0, bi_level_mix: 0.75 }
        : opts.algorithm === "gigpo"
        ? // GiGPO as its authors' scripts run it (gamma 0.95, omega 1; vagen's default gamma
          // is 1): a turn that walks into a hole is told
          // apart from the other moves tried on the same board. Advantages are centred, not
          // divided by the group's spread: dividing blows the small return differences of two
          // safe paths (0.95^3 against 0.95^5) up to the size of a fall into a hole.
          { adv_estimator: "gigpo", gamma: 0.95, step_advantage_w: recipe.rlStepAdvantageWeight ?? 1.0, gigpo_mode: "mean_norm" }
        : { adv_estimator: DEMO_ALGORITHMS[opts.algorithm], gamma: 1.0, lam: 1.0 },
    // Cosine decay to zero over the run: at a constant lr the late steps' noise undid part
    // of the lift (docs/demo.md).
    actor: { optim: { lr: recipe.rlLr, weight_decay: 0, warmup_style: "cosine", lr_warmup_steps: 0 }, ...update, entropy_coeff: recipe.rlEntropyCoeff ?? 0, ...(recipe.rlClipRatioHigh !== undefined ? { clip_ratio_high: recipe.rlClipRatioHigh } : {}) },
    critic: { optim: { lr: 1e-3, weight_decay: 0 }, ...update },
    trainer: {
      total_steps: opts.steps,
      save_freq: 0,
      // Mid-run and at the end (validation also runs before the first step, see below).
      test_freq: recipe.rlTestFreq ?? Math.max(1, Math.ceil(opts.steps / 2)),
      val_before_train: true,
      critic_warmup: recipe.rlCriticWarmup ?? 0,
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

/**
 * The world-model rewards of the wm format: each section read by Sokoban's exact parser
 * (no judge to run), scored by main's grouped F1 above its chance floor, paid on the
 * section's last token every turn, so a turn's perception and prediction are credited
 * where they were written.
 */
export function stateRewardConfig(reward: number, aggregation: "per_turn" | "episode_mean" = "per_turn"): Record<string, unknown> {
  return {
    state_estimation: { enable: true, reward },
    transition_prediction: { enable: true, reward },
    scorer: "exact",
    method: "grouped_f1",
    credit_site: "section_end",
    aggregation,
  };
}
