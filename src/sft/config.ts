/**
 * The `vagen sft` config: a base model, where the trajectories come from, and how to train.
 *
 *   model_dir: ../models/base          # a model directory of a registered family to start from
 *   output_dir: ../runs/sft/frozenlake # config.yaml, checkpoints/step_<N>/ (the trainer's format), final/ (a model directory)
 *   seed: 0
 *   data:
 *     layout: no_concat               # how episodes become samples: the harness RL will use
 *     solver:                         # demonstrations from a solver (BFS), some moves random
 *       env: FrozenLake
 *       config: {render_mode: vision, size: 4, prompt_format: no_think, max_actions_per_step: 1}
 *       episodes: 256
 *       seed_start: 100000
 *       max_turns: 8
 *       random_action_prob: 0.2
 *       careless_episode_prob: 0      # share of episodes by a careless solver (FrozenLake: blind to holes; Sokoban: walks through the box)
 *       state_noise_prob: 0           # wm formats: chance that a stated object's place is wrong
 *     eval_dirs: [../runs/eval/x]     # and/or `vagen eval` outputs ...
 *     only_success: true              # ... keeping successful episodes only
 *   optim: {lr: 1e-3, weight_decay: 0.01, grad_clip: 1.0, warmup_steps: 10}
 *   train: {epochs: 2, batch_size: 16}
 *
 * Paths are relative to the config file that set them (as in every vagen config).
 */
import * as v from "valibot";
import { type ConfigKind, type ResolvedConfig, resolveConfig, resolveConfigPath, validateResolved } from "../config/index.ts";
import { VagenError } from "../core/errors.ts";
import { loraEntries } from "../training/lora-config.ts";

const positiveInt = (what: string) => v.pipe(v.number(), v.integer(`${what}: an integer`), v.minValue(1, `${what} >= 1`));
const nonNegative = (what: string) => v.pipe(v.number(), v.minValue(0, `${what} >= 0`));

/** Which supervised samples an episode gives, matching the harness that will run the policy. */
const SAMPLE_LAYOUTS = ["concat", "no_concat", "observation_only", "observation_history"] as const;
export type SampleLayout = (typeof SAMPLE_LAYOUTS)[number];

export const SolverDataConfig = v.strictObject({
  /** A registered env with a solver: FrozenLake (BFS) or Sokoban (BFS over pushes). */
  env: v.picklist(["FrozenLake", "Sokoban"], "FrozenLake or Sokoban (the envs with a solver)"),
  /** The env's own config (validated by the env). */
  config: v.optional(v.record(v.string(), v.unknown()), {}),
  episodes: positiveInt("episodes"),
  /** Episode i plays seed seed_start + i; keep these apart from the seeds you validate on. */
  seed_start: v.optional(v.pipe(v.number(), v.integer()), 0),
  max_turns: v.optional(positiveInt("max_turns"), 8),
  /** Chance that a move is uniformly random instead of the solver's: imperfect demonstrations. */
  random_action_prob: v.optional(v.pipe(v.number(), v.minValue(0), v.maxValue(1, "random_action_prob <= 1")), 0),
  /**
   * Which moves a random move is drawn from: `any` of the env's actions, or (FrozenLake
   * only) `safe` ones, onto another ice tile or the goal, never into a hole or the edge:
   * demonstrations that wander but always step around holes.
   */
  random_moves: v.optional(v.picklist(["any", "safe"], "any or safe"), "any"),
  /** Moves written per answer (up to the env's max_actions_per_step). */
  actions_per_turn: v.optional(positiveInt("actions_per_turn"), 1),
  /**
   * Chance that a whole episode is demonstrated by a careless solver: FrozenLake's plans
   * the shortest path as if the holes were ice and walks into one when the path crosses
   * it; Sokoban's makes the shortest solution's next push but walks to it as if the box
   * were floor, through the box where a shortest such walk crosses it, pushing the box
   * astray (on VAGEN's 6x6 one-box levels it then fails 166 of 400). Mixed-quality
   * demonstrations: imitation copies both solvers.
   */
  careless_episode_prob: v.optional(v.pipe(v.number(), v.minValue(0), v.maxValue(1, "careless_episode_prob <= 1")), 0),
  /**
   * Under the world-model formats (Sokoban's `wm`, `wm_think`, `free_wm`), the chance that
   * an object the solver states in `<perception>` or `<prediction>` is wrong on one axis
   * (src/sft/reasoning.ts): descriptions that the state rewards can still improve. Each
   * section's expected F1 is 1 - state_noise_prob / 2. Unset: 0 (optional in the checked
   * type too, so configs built in code before it existed still type-check).
   */
  state_noise_prob: v.optional(v.pipe(v.number(), v.minValue(0, "state_noise_prob >= 0"), v.maxValue(1, "state_noise_prob <= 1"))),
});
export type SolverDataConfig = v.InferOutput<typeof SolverDataConfig>;

/**
 * What is wrong with `solver`'s FrozenLake-only settings outside FrozenLake, if anything:
 * the key and the message (only FrozenLake knows which moves are safe).
 */
export function frozenLakeOnlyProblem(solver: SolverDataConfig): { key: string; message: string } | undefined {
  if (solver.env === "FrozenLake") return undefined;
  if (solver.random_moves === "safe") return { key: "random_moves", message: `got "safe", expected "any" (only FrozenLake knows which moves are safe)` };
  return undefined;
}

export const SftDataConfig = v.strictObject({
  layout: v.optional(v.picklist(SAMPLE_LAYOUTS, "concat, no_concat, observation_only or observation_history"), "no_concat"),
  solver: v.optional(SolverDataConfig),
  /** `vagen eval` output directories (each holds <tag>/seed_<N>/ episode folders). */
  eval_dirs: v.optional(v.array(v.pipe(v.string(), v.minLength(1))), []),
  /** Keep only episodes that reached success (eval outputs and solver episodes alike). */
  only_success: v.optional(v.boolean(), true),
  /**
   * Keyword arguments of every chat-template rendering, as `vagen train`'s key of the same
   * name (unset: VAGEN's `{enable_thinking: false}`, so a warm start renders as the RL run after it).
   */
  apply_chat_template_kwargs: v.optional(v.record(v.string(), v.unknown())),
});
export type SftDataConfig = v.InferOutput<typeof SftDataConfig>;

export const SftOptimConfig = v.strictObject({
  lr: v.optional(v.pipe(v.number(), v.gtValue(0, "lr > 0")), 1e-3),
  weight_decay: v.optional(nonNegative("weight_decay"), 0.01),
  /** Gradient norm clipping (0 = off). */
  grad_clip: v.optional(nonNegative("grad_clip"), 1.0),
  /** Linear warmup from 0 over this many optimizer steps, then constant or cosine. */
  warmup_steps: v.optional(v.pipe(v.number(), v.integer(), v.minValue(0)), 0),
  schedule: v.optional(v.picklist(["constant", "cosine"]), "constant"),
});
export type SftOptimConfig = v.InferOutput<typeof SftOptimConfig>;

export const SftTrainConfig = v.strictObject({
  epochs: v.optional(positiveInt("epochs"), 1),
  /** Samples per optimizer step. */
  batch_size: v.optional(positiveInt("batch_size"), 16),
  /** Samples per forward pass (gradients accumulate over a batch's micro-batches). */
  micro_batch_size: v.optional(positiveInt("micro_batch_size"), 16),
  /** Stop after this many optimizer steps (0 = run every epoch). */
  max_steps: v.optional(v.pipe(v.number(), v.integer(), v.minValue(0)), 0),
  /**
   * Stop once the mean training loss of the last `STOP_LOSS_WINDOW` (10) steps is below
   * this (0 = never): a warm start trained to a given fit of the data rather than a given
   * number of steps, which from one seed to the next reach very different fits early on.
   */
  stop_below_loss: v.optional(v.pipe(v.number(), v.minValue(0)), 0),
  /** Write a checkpoint (`checkpoints/step_<N>`) after every epoch (the last step's is always written). */
  save_every_epoch: v.optional(v.boolean(), false),
  /**
   * Leave the vision encoder's weights as they are and train only the language model. A
   * policy trained from scratch needs it: trained at the decoder's learning rate, its
   * random vision tower loses what tells board cells apart (docs/demo.md).
   */
  freeze_vision_tower: v.optional(v.boolean(), false),
  /** LoRA, as `vagen train`'s actor section (src/training/lora-config.ts): lora_rank > 0 trains adapters only. */
  ...loraEntries,
  /**
   * Label smoothing of the cross-entropy (PyTorch's label_smoothing): the target keeps
   * 1 - e of its weight and e spreads over the vocabulary, so the warm start stays less
   * sure of itself and RL after it still samples the other moves.
   */
  label_smoothing: v.optional(v.pipe(v.number(), v.minValue(0), v.maxValue(0.5, "label_smoothing <= 0.5")), 0),
});
export type SftTrainConfig = v.InferOutput<typeof SftTrainConfig>;

export const SftConfig = v.strictObject({
  model_dir: v.pipe(v.string(), v.minLength(1, "a model directory")),
  output_dir: v.pipe(v.string(), v.minLength(1, "a directory path")),
  seed: v.optional(v.pipe(v.number(), v.integer()), 0),
  device: v.optional(v.string(), "cpu"),
  dtype: v.optional(v.picklist(["f32", "bf16"]), "f32"),
  data: SftDataConfig,
  optim: v.optional(SftOptimConfig, {}),
  train: v.optional(SftTrainConfig, {}),
});
export type SftConfig = v.InferOutput<typeof SftConfig>;

/** Checks across keys; `file` names the config in the message. */
export function checkSftConfig(config: SftConfig, file = "sft config"): SftConfig {
  if (!config.data.solver && config.data.eval_dirs.length === 0) {
    throw new VagenError(`${file}: key "data": no trajectories: give data.solver, data.eval_dirs, or both`);
  }
  const frozenLakeOnly = config.data.solver && frozenLakeOnlyProblem(config.data.solver);
  if (frozenLakeOnly) throw new VagenError(`${file}: key "data.solver.${frozenLakeOnly.key}": ${frozenLakeOnly.message}`);
  if (config.train.batch_size % config.train.micro_batch_size !== 0 && config.train.micro_batch_size < config.train.batch_size) {
    throw new VagenError(
      `${file}: key "train.micro_batch_size": ${config.train.micro_batch_size} does not divide train.batch_size ${config.train.batch_size}`,
    );
  }
  return config;
}

/** A validated config with its paths made absolute (relative to the file that set each). */
function checkResolvedSftConfig(resolved: ResolvedConfig): SftConfig {
  const config = checkSftConfig(validateResolved(SftConfig, resolved), resolved.file);
  return {
    ...config,
    model_dir: resolveConfigPath(resolved, ["model_dir"], config.model_dir),
    output_dir: resolveConfigPath(resolved, ["output_dir"], config.output_dir),
    data: {
      ...config.data,
      eval_dirs: config.data.eval_dirs.map((dir, i) => resolveConfigPath(resolved, ["data", "eval_dirs", String(i)], dir)),
    },
  };
}

export function loadSftConfig(file: string, overrides: string[]): SftConfig {
  return checkResolvedSftConfig(resolveConfig(file, overrides));
}

/** The sft config kind, for `vagen config show` (registered by the CLI at start-up). */
export const sftConfigKind: ConfigKind = {
  name: "sft",
  description: "vagen sft: supervised warm-start on trajectories",
  schema: SftConfig,
  load: async (resolved) => checkResolvedSftConfig(resolved),
  detect: (data) => "data" in data && "model_dir" in data && "output_dir" in data,
};
