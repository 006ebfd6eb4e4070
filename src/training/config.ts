/**
 * The `vagen train` config: VAGEN's `vagen_multiturn.yaml` over verl's `ppo_trainer`,
 * flattened one level (verl's `actor_rollout_ref.actor.*` is `actor.*`, its
 * `actor_rollout_ref.rollout.*` is `rollout.*`) with verl's and VAGEN's key names
 * everywhere else. Defaults are VAGEN main's (spec §9.1, §9.4; main §5.1).
 *
 *   model:     {model_dir: ..., device: cpu, dtype: f32}
 *   data:      {train_batch_size: 128, max_prompt_length: 9000, max_response_length: 8000,
 *               train: {sokoban: {name: Sokoban, n_envs: 100, seed: [1, 100, 1], max_turns: 5, ...}}, val: {...}}
 *
 * VAGEN's env specs are a list; here they are a mapping keyed by a tag (as in eval
 * configs) so that overrides can reach them (`data.train.sokoban.n_envs=64`) and metrics
 * are named by it; the spec index of the seed hash is the tag's position.
 *   rollout:   {n: 1, temperature: 1.0, top_p: 1.0, val_kwargs: {temperature: 0, n: 1}}
 *   algorithm: {adv_estimator: default_gae, gamma: 1.0, lam: 1.0, ...}
 *   actor:     {optim: {lr: 1e-6, ...}, ppo_mini_batch_size: 32, ...}
 *   critic:    {enable: null, optim: {lr: 1e-5, ...}, ...}
 *   filter:    {enable: false, name: reward_variance_top_p, filter_kwargs: {top_p: 0.9}}
 *   trainer:   {total_steps: 401, save_freq: 100, test_freq: 20, output_dir: ..., resume: auto, ...}
 *
 *   algorithm.rollout_correction: {rollout_is: token, rollout_is_threshold: 2.0, rollout_rs: null}
 *
 * `loadTrainConfig` is everything `vagen train` checks before it loads a model: the
 * schema, the checks across keys (batch divisibility, response lengths, the estimator
 * against the critic and the harness), and each env's own config.
 */
import { VAGEN_CHAT_TEMPLATE_KWARGS } from "../core/chat.ts";
import { MODEL_ADAPTERS } from "../models/family-list.ts";
import * as v from "valibot";
import { createEnv, isImportPath as isEnvImportPath } from "../../envs/registry.ts";
import { splitStateReward } from "../rewards/index.ts";
import { prepareStateRewards } from "./state-rewards.ts";
import { loraEntries } from "./lora-config.ts";
import {
  type ConfigKind,
  type ResolvedConfig,
  resolveConfig,
  resolveConfigPath,
  sourceOf,
  validateResolved,
  type Sources,
} from "../config/index.ts";
import { VagenError } from "../core/errors.ts";
import { normalizeSeedDirective, seedDirectiveProblem } from "../core/seeds.ts";
import {
  algorithmParamsSchema,
  estimatorNames,
  getEstimator,
  KL_PENALTIES,
  KlControlConfig,
  LOSS_AGG_MODES,
  POLICY_LOSS_MODES,
  ROLLOUT_IS_LEVELS,
  ROLLOUT_RS_LEVELS,
  validateEstimatorSetup,
  type ResolvedEstimator,
} from "../algorithms/index.ts";
import { EngineSettings } from "../engine/index.ts";
import { createHarness, isImportPath as isHarnessImportPath } from "../harness/registry.ts";
import { HuggingFaceHubSection, loggerTrainerEntries } from "./loggers/schema.ts";

const positiveInt = (what: string) => v.pipe(v.number(), v.integer(`${what}: an integer`), v.minValue(1, `${what} >= 1`));
const nonNegativeInt = (what: string) => v.pipe(v.number(), v.integer(`${what}: an integer`), v.minValue(0, `${what} >= 0`));
const integer = v.pipe(v.number(), v.safeInteger("an integer"));
const positive = v.pipe(v.number(), v.check((x) => Number.isFinite(x) && x > 0, "a finite number > 0"));
const nonNegative = v.pipe(v.number(), v.check((x) => Number.isFinite(x) && x >= 0, "a finite number >= 0"));
const unit = v.pipe(v.number(), v.check((x) => Number.isFinite(x) && x >= 0 && x <= 1, "a number in [0, 1]"));

const SeedDirectiveSpec = v.union(
  [integer, v.pipe(v.array(integer), v.minLength(1), v.maxLength(3))],
  "a seed directive: [a], [lo, hi] or [lo, hi, k] (k = how often one seed may repeat)",
);

const EnvTag = v.pipe(v.string(), v.regex(/^[A-Za-z0-9][\w.-]*$/, "a tag of letters, digits, '_', '-' and '.'"));

/** One entry of VAGEN's env-spec list (dataset yaml, main §5.2). */
export const TrainEnvSpec = v.strictObject({
  /** Registered env name (Sokoban, FrozenLake, ...) or an import path. */
  name: v.pipe(v.string(), v.minLength(1)),
  /** Env instances this entry contributes to the dataset. */
  n_envs: positiveInt("n_envs"),
  /** VAGEN's seed directive; `seed_list` overrides it. */
  seed: v.optional(SeedDirectiveSpec, [0]),
  seed_list: v.optional(v.array(v.pipe(v.number(), v.integer()))),
  /** VAGEN's split label; it only feeds the seed directive's hash. */
  split: v.optional(v.pipe(v.string(), v.minLength(1)), "default"),
  /** Required by VAGEN's loop. */
  max_turns: positiveInt("max_turns"),
  /** Tokens one model turn may generate (becomes max_tokens). */
  response_length_per_turn: v.optional(positiveInt("response_length_per_turn"), 512),
  /** The env's own config (validated by the env). */
  config: v.optional(v.record(v.string(), v.unknown()), {}),
});
export type TrainEnvSpec = v.InferOutput<typeof TrainEnvSpec>;

export const ModelSection = v.strictObject({
  /** A Hugging Face model directory (config.json, safetensors, tokenizer). */
  model_dir: v.pipe(v.string(), v.minLength(1, "a model directory")),
  device: v.optional(v.picklist(["cpu", "cuda"]), "cpu"),
  dtype: v.optional(v.picklist(["f32", "bf16"]), "f32"),
});

export const DataSection = v.strictObject({
  /** Dataset items (env instances) per step, before `rollout.n` repeats. */
  train_batch_size: v.optional(positiveInt("train_batch_size"), 128),
  /** Token cap of the first prompt (system + first user message). */
  max_prompt_length: v.optional(positiveInt("max_prompt_length"), 9000),
  /** Concat: the whole multi-turn tail (generations + observations); other harnesses: one conversation. */
  max_response_length: v.optional(positiveInt("max_response_length"), 8000),
  /** Shuffle the env dataset each epoch (seeded by trainer.seed). */
  shuffle: v.optional(v.boolean(), true),
  /** VAGEN's base_seed: feeds every env's seed directive hash. */
  base_seed: v.optional(integer, 0),
  /**
   * Keyword arguments of every chat-template rendering (transformers' apply_chat_template):
   * VAGEN's default turns Qwen3's thinking mode off; templates without the variable ignore it.
   */
  apply_chat_template_kwargs: v.optional(v.record(v.string(), v.unknown()), () => ({ ...VAGEN_CHAT_TEMPLATE_KWARGS })),
  /** Env specs keyed by a tag (metrics: `train/<tag>/success_rate`); the order of the keys is the spec order. */
  train: v.pipe(v.record(EnvTag, TrainEnvSpec), v.check((r) => Object.keys(r).length > 0, "at least one env")),
  val: v.optional(v.record(EnvTag, TrainEnvSpec), {}),
});

const SamplingSection = v.strictObject({
  temperature: v.optional(nonNegative, 1.0),
  top_p: v.optional(v.pipe(v.number(), v.check((x) => x > 0 && x <= 1, "a number in (0, 1]")), 1.0),
  n: v.optional(positiveInt("n"), 1),
});

export const RolloutSection = v.strictObject({
  /** Rollouts per dataset item (the group size of GRPO). */
  n: v.optional(positiveInt("n"), 1),
  /** Sampling temperature of the training rollouts; > 0 (the log-probs divide by it; validation may be greedy). */
  temperature: v.optional(positive, 1.0),
  top_p: v.optional(v.pipe(v.number(), v.check((x) => x > 0 && x <= 1, "a number in (0, 1]")), 1.0),
  /** Validation sampling (verl: greedy, one rollout). */
  val_kwargs: v.optional(SamplingSection, { temperature: 0, top_p: 1, n: 1 }),
  /**
   * Take the old log-probs from the engine's sampling instead of a trainer forward. Only
   * valid when the update is exactly on-policy (one mini-batch, one epoch, temperature 1,
   * top_p 1): then the two agree up to kernel rounding and the forward is saved.
   */
  use_engine_logprobs: v.optional(v.boolean(), false),
  /** The in-process engine that generates with the actor's weights (device and dtype are the model's). */
  engine: v.optional(v.omit(EngineSettings, ["device", "dtype", "seed", "chat_template_kwargs"]), {}),
});

/**
 * verl's algorithm.rollout_correction: importance weights π_old / π_rollout from the
 * engine's sampled log-probs (truncated at rollout_is_threshold, per token or per row),
 * and optional rejection of tokens or rows whose ratio leaves [lower, upper]. On by
 * default (token-level, threshold 2): with the engine's log-probs kept it costs nothing,
 * and it is exactly 1 wherever the two policies agree.
 */
export const RolloutCorrectionSection = v.strictObject({
  rollout_is: v.optional(v.nullable(v.picklist(ROLLOUT_IS_LEVELS)), "token"),
  rollout_is_threshold: v.optional(positive, 2.0),
  rollout_rs: v.optional(v.nullable(v.picklist(ROLLOUT_RS_LEVELS)), null),
  rollout_rs_threshold: v.optional(positive, 2.0),
  /** null: 1 / rollout_rs_threshold. */
  rollout_rs_threshold_lower: v.optional(v.nullable(nonNegative), null),
});

export const AlgorithmSection = v.strictObject({
  adv_estimator: v.optional(v.pipe(v.string(), v.minLength(1)), "default_gae"),
  ...algorithmParamsSchema.entries,
  use_kl_in_reward: v.optional(v.boolean(), false),
  kl_penalty: v.optional(v.picklist(KL_PENALTIES), "kl"),
  /** The controller's own schema (src/algorithms/kl.ts): what the config accepts, the controller takes. */
  kl_ctrl: v.optional(KlControlConfig, {}),
  rollout_correction: v.optional(RolloutCorrectionSection, {}),
});

export const OptimSection = v.strictObject({
  lr: v.optional(positive, 1e-6),
  weight_decay: v.optional(nonNegative, 0.01),
  betas: v.optional(v.tuple([unit, unit]), [0.9, 0.999]),
  eps: v.optional(positive, 1e-8),
  /** Warmup steps; a negative value defers to lr_warmup_steps_ratio (verl). */
  lr_warmup_steps: v.optional(integer, -1),
  lr_warmup_steps_ratio: v.optional(unit, 0),
  /** constant or cosine after warmup (verl's warmup_style). */
  warmup_style: v.optional(v.picklist(["constant", "cosine"]), "constant"),
  min_lr_ratio: v.optional(unit, 0),
});

/** Keys shared by the actor's and the critic's update. */
const updateEntries = {
  /** Dataset items per mini-batch (times rollout.n rows under concat, as verl). */
  ppo_mini_batch_size: v.optional(positiveInt("ppo_mini_batch_size"), 32),
  /** Rows per forward/backward (gradient accumulation over a mini-batch). */
  ppo_micro_batch_size: v.optional(positiveInt("ppo_micro_batch_size"), 1),
  /** Pack micro-batches by a token budget instead of by count (verl's use_dynamic_bsz). */
  use_dynamic_bsz: v.optional(v.boolean(), false),
  ppo_max_token_len: v.optional(positiveInt("ppo_max_token_len"), 16384),
  ppo_epochs: v.optional(positiveInt("ppo_epochs"), 1),
  shuffle: v.optional(v.boolean(), false),
  grad_clip: v.optional(positive, 1.0),
  loss_agg_mode: v.optional(v.picklist(LOSS_AGG_MODES), "token-mean"),
  /** seq-mean-token-sum-norm's constant per row (Dr. GRPO's L_max); null: data.max_response_length. */
  loss_scale_factor: v.optional(v.nullable(positive), null),
  /** Rows of logits turned into log-probs at a time (memory bound of the vocabulary softmax). */
  logprob_chunk_tokens: v.optional(positiveInt("logprob_chunk_tokens"), 1024),
  /** Leave the vision encoder's weights as they are: only the language model trains (verl's name). */
  freeze_vision_tower: v.optional(v.boolean(), false),
  /**
   * AdamW's state (moments, f32 master copies) in host memory instead of the GPU's, the
   * step run there (verl's fsdp_config.optimizer_offload): 12 bytes a parameter move off
   * the GPU, for a copy of the gradients to the host and back each step.
   */
  optimizer_offload: v.optional(v.boolean(), false),
};

export const ActorSection = v.strictObject({
  optim: v.optional(OptimSection, {}),
  ...updateEntries,
  /** LoRA (lora-config.ts): with lora_rank > 0 only the adapters train and the reference is the base. */
  ...loraEntries,
  clip_ratio: v.optional(unit, 0.2),
  clip_ratio_low: v.optional(v.nullable(unit)),
  clip_ratio_high: v.optional(v.nullable(nonNegative)),
  clip_ratio_c: v.optional(v.pipe(v.number(), v.check((x) => x > 1, "a number > 1")), 3.0),
  entropy_coeff: v.optional(v.number(), 0),
  use_kl_loss: v.optional(v.boolean(), false),
  kl_loss_coef: v.optional(nonNegative, 0.001),
  kl_loss_type: v.optional(v.picklist(KL_PENALTIES), "low_var_kl"),
  policy_loss: v.optional(v.strictObject({ loss_mode: v.optional(v.picklist(POLICY_LOSS_MODES), "vanilla") }), {}),
});

export const CriticSection = v.strictObject({
  /** null: on exactly when the estimator needs values (verl's auto). */
  enable: v.optional(v.nullable(v.boolean()), null),
  optim: v.optional(OptimSection, { lr: 1e-5 }),
  ...updateEntries,
  cliprange_value: v.optional(nonNegative, 0.5),
  /**
   * LoRA for the critic (lora-config.ts): its own adapters and value head over a frozen
   * base, which is the actor's own when the actor trains LoRA too (no second copy).
   */
  ...loraEntries,
  /** Seed of the fresh value head. */
  value_head_seed: v.optional(integer, 0),
});

export const FilterSection = v.strictObject({
  enable: v.optional(v.boolean(), false),
  name: v.optional(v.picklist(["reward_variance", "reward_variance_top_p"]), "reward_variance_top_p"),
  /** reward_variance_top_p reads top_p, reward_variance reads topk (VAGEN's names). */
  filter_kwargs: v.optional(v.strictObject({ top_p: v.optional(unit, 0.9), topk: v.optional(unit, 0.2) }), {}),
});

export const TrainerSection = v.strictObject({
  total_steps: v.optional(positiveInt("total_steps"), 401),
  /** Save a checkpoint every this many steps (and at the end); 0: only at the end. */
  save_freq: v.optional(nonNegativeInt("save_freq"), 100),
  /** Save a checkpoint after the last step too (off for throwaway benchmark runs). */
  save_at_end: v.optional(v.boolean(), true),
  /** Validate every this many steps (and at the end); 0: never during training. */
  test_freq: v.optional(nonNegativeInt("test_freq"), 20),
  val_before_train: v.optional(v.boolean(), true),
  critic_warmup: v.optional(nonNegativeInt("critic_warmup"), 0),
  output_dir: v.pipe(v.string(), v.minLength(1, "a directory path")),
  /** `auto`: continue from the newest complete checkpoint under output_dir, if any; `never`; or a checkpoint path. */
  resume: v.optional(v.pipe(v.string(), v.minLength(1)), "auto"),
  dump_batches: v.optional(v.boolean(), false),
  keep_checkpoints: v.optional(positiveInt("keep_checkpoints"), 1),
  save_best_actor: v.optional(v.boolean(), true),
  /** Episodes per step written under rollouts/step_<N>/ for people to look at. */
  log_episodes: v.optional(nonNegativeInt("log_episodes"), 4),
  /** Harness for every env: concat, no_concat, compact, or an import path. */
  harness: v.optional(v.pipe(v.string(), v.minLength(1)), "concat"),
  /** Seed of the data order, sampling and the value head. */
  seed: v.optional(integer, 1),
  /** End the run when a phase makes no progress for this long (seconds; 0: never). */
  watchdog_s: v.optional(nonNegative, 1800),
  /**
   * Data-parallel ranks on this machine (VAGEN's key): one process per GPU, or with
   * model.device cpu one CPU process each (Gloo). See docs/distributed.md.
   */
  n_gpus_per_node: v.optional(positiveInt("n_gpus_per_node"), 1),
  /** Machines of the run; with more than one, each is launched with torchrun's variables. */
  nnodes: v.optional(positiveInt("nnodes"), 1),
  /**
   * ZeRO stage: 0, every rank holds AdamW's whole state; 1, each holds its share of the
   * parameters' state (the optimizer's memory divided by the ranks); 2, also only its
   * share of the reduced gradients (docs/distributed.md).
   */
  zero_stage: v.optional(v.picklist([0, 1, 2], "0, 1 or 2"), 0),
  /**
   * VAGEN's choice of chat rendering per family: `auto` takes the family of config.json's
   * `model_type`; a named one must be that family's (checked when the model loads).
   */
  model_adapter: v.optional(v.picklist(MODEL_ADAPTERS, `one of ${MODEL_ADAPTERS.join(", ")}`), "auto"),
  /**
   * Data parallel: gradients are summed over the ranks in buckets of this many MiB while
   * the backward pass runs (as PyTorch's DDP, whose default is 25); 0: one all-reduce
   * after a mini-batch's last backward.
   */
  ddp_bucket_mb: v.optional(nonNegative, 25),
  /**
   * The ranks' process group: `auto` is NCCL on GPUs when every rank on a machine has a GPU
   * of its own, else Gloo (on the CPU, and for ranks that share a GPU, which NCCL refuses;
   * Gloo sums CUDA tensors through host memory). See docs/distributed.md.
   */
  dist_backend: v.optional(v.picklist(["auto", "nccl", "gloo"], "auto, nccl or gloo"), "auto"),
  /** How long a rank waits for the others (a collective, the exchange of a step's rows) before the run fails. */
  dist_timeout_s: v.optional(positive, 600),
  /** logger, tensorboard, project_name, experiment_name, log_image, ... (docs/logging.md). */
  ...loggerTrainerEntries,
  /** Stop the run after this many steps in a row whose update met a non-finite loss or gradient. */
  max_nonfinite_steps: v.optional(positiveInt("max_nonfinite_steps"), 3),
  /** Resume even when the config changed what the checkpoint holds (model, dtype, critic). */
  resume_allow_changes: v.optional(v.boolean(), false),
});

export const TrainConfig = v.strictObject({
  model: ModelSection,
  data: DataSection,
  rollout: v.optional(RolloutSection, {}),
  algorithm: v.optional(AlgorithmSection, {}),
  actor: v.optional(ActorSection, {}),
  critic: v.optional(CriticSection, {}),
  filter: v.optional(FilterSection, {}),
  trainer: TrainerSection,
  huggingface_hub: v.optional(HuggingFaceHubSection, {}),
});
export type TrainConfig = v.InferOutput<typeof TrainConfig>;

/** A checked config with what the checks derived. */
export interface CheckedTrainConfig {
  config: TrainConfig;
  /** The estimator with its resolved `algorithm.*` knobs. */
  estimator: ResolvedEstimator;
  /** critic.enable after verl's auto rule. */
  useCritic: boolean;
  /** A frozen reference policy is needed (KL loss or KL in reward). */
  useReference: boolean;
  /** The file the config came from, for messages. */
  file: string;
}

/**
 * Checks that span keys. Everything here fails before a model is loaded, naming the key,
 * the value and what was expected.
 */
export function checkTrainConfig(config: TrainConfig, file = "train config", sources?: Sources): CheckedTrainConfig {
  // A message names who set the key: its file, or the command line's override.
  const key = (path: string) => `${(sources && sourceOf(sources, path.split("."))) ?? file}: key "${path}"`;
  const { data, rollout, actor, critic, trainer, algorithm } = config;
  const splits = trainer.harness !== "concat";

  // critic.enable: null means "whatever the estimator needs"; an explicit false with a
  // critic estimator is refused by validateEstimatorSetup, naming critic.enable.
  const wantsCritic = estimatorNames().includes(algorithm.adv_estimator) && getEstimator(algorithm.adv_estimator).needsCritic;
  const useCritic = critic.enable ?? wantsCritic;
  const { adv_estimator, use_kl_in_reward: _k, kl_penalty: _p, kl_ctrl: _c, rollout_correction: _r, ...params } = algorithm;
  const estimator = validateEstimatorSetup({
    estimator: adv_estimator,
    params,
    useCritic,
    splitsEpisodeAcrossRows: splits,
    policyLossMode: actor.policy_loss.loss_mode,
    source: file,
  });

  // verl: a mini-batch is counted in dataset items and multiplied by rollout.n.
  for (const [section, s] of [["actor", actor], ["critic", critic]] as const) {
    if (section === "critic" && !useCritic) continue;
    if (data.train_batch_size % s.ppo_mini_batch_size !== 0) {
      throw new VagenError(
        `${key(`${section}.ppo_mini_batch_size`)}: got ${s.ppo_mini_batch_size}, expected a divisor of data.train_batch_size (${data.train_batch_size})`,
        "a step is split into equal mini-batches of dataset items",
      );
    }
    const rowsPerMini = s.ppo_mini_batch_size * rollout.n;
    if (!s.use_dynamic_bsz && rowsPerMini % s.ppo_micro_batch_size !== 0) {
      throw new VagenError(
        `${key(`${section}.ppo_micro_batch_size`)}: got ${s.ppo_micro_batch_size}, expected a divisor of ${section}.ppo_mini_batch_size x rollout.n (${rowsPerMini} rows)`,
      );
    }
  }
  if (rollout.use_engine_logprobs) {
    const onPolicy = actor.ppo_epochs === 1 && actor.ppo_mini_batch_size === data.train_batch_size && rollout.temperature === 1 && rollout.top_p === 1;
    if (!onPolicy) {
      throw new VagenError(
        `${key("rollout.use_engine_logprobs")}: got true, expected false unless the update is exactly on-policy (actor.ppo_epochs 1, actor.ppo_mini_batch_size = data.train_batch_size, rollout.temperature 1, rollout.top_p 1)`,
      );
    }
  }

  for (const [split, specs] of [["train", data.train], ["val", data.val]] as const) {
    Object.entries(specs).forEach(([tag, spec]) => {
      const at = `data.${split}.${tag}`;
      if (spec.seed_list === undefined) {
        const problem = seedDirectiveProblem(normalizeSeedDirective(spec.seed), spec.n_envs);
        if (problem) throw new VagenError(`${key(`${at}.seed`)}: ${problem}`, "widen [lo, hi], raise k, or lower n_envs");
      } else if (spec.seed_list.length < spec.n_envs) {
        throw new VagenError(`${key(`${at}.seed_list`)}: ${spec.seed_list.length} seed(s) listed, expected at least n_envs (${spec.n_envs})`);
      }
      // One model turn must fit the response budget, or every episode truncates at once.
      if (spec.response_length_per_turn > data.max_response_length) {
        throw new VagenError(
          `${key(`${at}.response_length_per_turn`)}: got ${spec.response_length_per_turn}, expected at most data.max_response_length (${data.max_response_length}): one turn must fit the response`,
        );
      }
    });
  }
  const trainItems = Object.values(data.train).reduce((s, e) => s + e.n_envs, 0);
  if (trainItems < data.train_batch_size) {
    throw new VagenError(`${key("data.train_batch_size")}: got ${data.train_batch_size}, expected at most the ${trainItems} env instance(s) of data.train`);
  }
  // VAGEN's rule: an upload is of a checkpoint, so it falls on a checkpoint step.
  const hfFreq = config.huggingface_hub.hf_save_freq;
  if (hfFreq !== null && (trainer.save_freq === 0 || hfFreq % trainer.save_freq !== 0)) {
    throw new VagenError(
      `${key("huggingface_hub.hf_save_freq")}: got ${hfFreq}, expected a multiple of trainer.save_freq (${trainer.save_freq})${trainer.save_freq === 0 ? ", which must be > 0" : ""}`,
      "an upload exports the checkpoint of its step; set trainer.save_freq to a divisor of hf_save_freq",
    );
  }
  const useReference = actor.use_kl_loss || algorithm.use_kl_in_reward;
  return { config, estimator, useCritic, useReference, file };
}

/** A copy of `config` whose relative paths are absolute (relative to the file that set them). */
export function resolveTrainPaths(config: TrainConfig, origins: Pick<ResolvedConfig, "baseDirs">): TrainConfig {
  const out: TrainConfig = structuredClone(config);
  out.model.model_dir = resolveConfigPath(origins, ["model", "model_dir"], config.model.model_dir);
  out.trainer.output_dir = resolveConfigPath(origins, ["trainer", "output_dir"], config.trainer.output_dir);
  const resume = config.trainer.resume;
  if (resume !== "auto" && resume !== "never") out.trainer.resume = resolveConfigPath(origins, ["trainer", "resume"], resume);
  if (isHarnessImportPath(config.trainer.harness)) out.trainer.harness = resolveConfigPath(origins, ["trainer", "harness"], config.trainer.harness);
  for (const split of ["train", "val"] as const) {
    for (const [tag, spec] of Object.entries(out.data[split])) {
      if (isEnvImportPath(spec.name)) spec.name = resolveConfigPath(origins, ["data", split, tag, "name"], spec.name);
    }
  }
  return out;
}

/**
 * The whole validation of a resolved train config: schema, paths, checks across keys,
 * and each env's config and the harness (built once and closed). No model is loaded.
 */
export async function checkResolvedTrainConfig(resolved: ResolvedConfig): Promise<CheckedTrainConfig> {
  const checked = checkTrainConfig(resolveTrainPaths(validateResolved(TrainConfig, resolved), resolved), resolved.file, resolved.sources);
  const { config } = checked;
  await withKey(`${resolved.file}: key "trainer.harness"`, () => createHarness(config.trainer.harness));
  for (const split of ["train", "val"] as const) {
    for (const [tag, spec] of Object.entries(config.data[split])) {
      // The env never sees state_reward (main's build_env pops it); prepareStateRewards checks it below.
      const env = await withKey(`${resolved.file}: key "data.${split}.${tag}": could not create env "${spec.name}"`, () => createEnv(spec.name, splitStateReward(spec.config).env));
      await env.close();
    }
  }
  await prepareStateRewards(config.data, resolved.file, createEnv);
  return checked;
}

export async function loadTrainConfig(file: string, overrides: string[] = []): Promise<CheckedTrainConfig> {
  return checkResolvedTrainConfig(resolveConfig(file, overrides));
}

async function withKey<T>(where: string, make: () => Promise<T>): Promise<T> {
  try {
    return await make();
  } catch (err) {
    const message = err instanceof Error ? err.message : String(err);
    throw new VagenError(`${where}: ${message}`, err instanceof VagenError ? err.hint : undefined);
  }
}

/** The train config kind, for `vagen config show` (registered by the CLI at start-up; see src/cli/main.ts). */
export const trainConfigKind: ConfigKind = {
  name: "train",
  description: "a vagen train config (model, data, rollout, algorithm, actor, critic, trainer)",
  schema: TrainConfig,
  load: (resolved) => checkResolvedTrainConfig(resolved).then((c) => c.config),
  detect: (data) => typeof data.trainer === "object" && typeof data.data === "object",
};
