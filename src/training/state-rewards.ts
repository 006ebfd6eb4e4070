/**
 * World-model (state) rewards in a training run (VAGEN-Full): each env spec's
 * `config.state_reward` block is taken out of the env's config (the env never sees it),
 * validated, checked against the env as main's `build_env` does, and turned into one
 * scorer per spec, before any model loads. Per rollout step, `collectRollouts` scores
 * every turn through the scorer's hook (src/rewards) and the step's metrics come back
 * here, to be named `train/<tag>/...` (or `val/<tag>/...`) like the other env metrics.
 */
import * as v from "valibot";
import type { Env, StateRewardSpec } from "../../envs/_common/types.ts";
import { validate } from "../config/index.ts";
import {
  checkStateRewardSetup,
  enabledSections,
  splitStateReward,
  StateRewardConfig,
  StateRewardScorer,
  stateRewardHook,
  tokenEndsByPrefixDecode,
  tokenEndsFromBytes,
  withStateRewardPrompt,
  type TokenEndsOf,
} from "../rewards/index.ts";
import type { EpisodeRecord } from "../harness/types.ts";
import type { TurnScores } from "../rollout/index.ts";

/**
 * What this module reads of a `data.train` / `data.val` entry (config.ts's `TrainEnvSpec`
 * is one): declared here so config.ts, which runs `prepareStateRewards`, is not imported
 * back.
 */
export interface RewardedEnvSpec {
  /** Registered env name or import path. */
  name: string;
  /** The env's config, `state_reward` block included. */
  config: Record<string, unknown>;
}

/** One env spec with its `state_reward` block split off. */
export interface EnvSpecSetup {
  /** The config the env is built with: the spec's config less `state_reward`. */
  envConfig: Record<string, unknown>;
  /** The validated block and the env's state spec, when the spec has a section enabled. */
  stateReward?: { config: StateRewardConfig; spec: StateRewardSpec };
}

/** `data.train` / `data.val` specs by split and tag. */
export type SpecSetups = Record<"train" | "val", Map<string, EnvSpecSetup>>;

/**
 * Splits and validates every spec's `state_reward`, and runs main's startup checks
 * against an instance of each env that has one on (built with `createEnv`, then closed).
 * Every refusal names `<file>: key "data.<split>.<tag>.config.state_reward..."`.
 */
export async function prepareStateRewards(
  data: Record<"train" | "val", Record<string, RewardedEnvSpec>>,
  file: string,
  createEnv: (name: string, config: Record<string, unknown>) => Promise<Env>,
): Promise<SpecSetups> {
  const setups: SpecSetups = { train: new Map(), val: new Map() };
  for (const split of ["train", "val"] as const) {
    for (const [tag, spec] of Object.entries(data[split])) {
      const where = `data.${split}.${tag}.config.state_reward`;
      const { env: envConfig, stateReward: raw } = splitStateReward(spec.config);
      const setup: EnvSpecSetup = { envConfig };
      setups[split].set(tag, setup);
      if (raw === undefined) continue;
      const config = validateAt(["data", split, tag, "config", "state_reward"], raw, file);
      if (enabledSections(config).length === 0) continue;
      const env = await createEnv(spec.name, envConfig);
      try {
        checkStateRewardSetup({
          config,
          promptFormat: typeof envConfig.prompt_format === "string" ? envConfig.prompt_format : undefined,
          spec: env.stateRewardSpec,
          where: `${file}: key "${where}"`,
          envName: spec.name,
        });
        setup.stateReward = { config, spec: env.stateRewardSpec! };
      } finally {
        await env.close();
      }
    }
  }
  return setups;
}

/**
 * Builds a spec's envs as the agent sees them with the reward on: main's system-prompt
 * addition (format, examples, axes) when the env's own prompt lacks the four tags.
 */
export function rewardedEnvFactory<I>(setup: EnvSpecSetup | undefined, create: (item: I) => Promise<Env>): (item: I) => Promise<Env> {
  const reward = setup?.stateReward;
  if (!reward) return create;
  return async (item) => withStateRewardPrompt(await create(item), reward.config, reward.spec);
}

/** What `collectRollouts` gets for a spec's episodes, and the metrics the hook reported. */
export interface StepStateRewards {
  scoreTurns?: (episodes: readonly EpisodeRecord[], signal?: AbortSignal) => Promise<(TurnScores | undefined)[][]>;
  /** Filled once the spec's batch is scored: `state_estimation_reward`, ..., `state_reward/judge_*`. */
  metrics: Record<string, number>;
}

/**
 * The scorers of a run: one per env spec with the reward on, kept for the whole run (the
 * paper's repetition tracker and the judge's counters live in it).
 */
export class StateRewardScorers {
  private readonly scorers = new Map<string, StateRewardScorer>();

  private readonly tokenEndsOf: TokenEndsOf;

  /**
   * How replies' tokens map to characters, to place each score on its token: the
   * tokenizer's bytes per id where it has them (byte-level BPE, as Qwen's), else decoding
   * every prefix with `decode` (special tokens skipped, as replies are decoded).
   */
  constructor(setups: SpecSetups, tokenizer: { tokenBytes?: (id: number) => Uint8Array; decode: (ids: number[]) => string }) {
    for (const split of ["train", "val"] as const) {
      for (const [tag, setup] of setups[split]) {
        if (setup.stateReward) this.scorers.set(`${split}.${tag}`, StateRewardScorer.create(setup.stateReward.config, setup.stateReward.spec));
      }
    }
    const { tokenBytes, decode } = tokenizer;
    this.tokenEndsOf = tokenBytes ? (ids) => tokenEndsFromBytes(ids, tokenBytes) : (ids) => tokenEndsByPrefixDecode(ids, decode);
  }

  /** A fresh hook for one step's batch of a spec (no scorer: nothing to add). */
  forStep(split: "train" | "val", tag: string): StepStateRewards {
    const scorer = this.scorers.get(`${split}.${tag}`);
    const step: StepStateRewards = { metrics: {} };
    if (scorer) step.scoreTurns = stateRewardHook(scorer, this.tokenEndsOf, (metrics) => Object.assign(step.metrics, metrics));
    return step;
  }
}

/**
 * The block validated where it sits, so a mistake is reported with its whole key path
 * (`key "data.train.lake.config.state_reward.score_base"`) and the file.
 */
function validateAt(path: readonly string[], raw: unknown, file: string): StateRewardConfig {
  let schema: v.GenericSchema = StateRewardConfig;
  let data: unknown = raw;
  for (const key of [...path].reverse()) {
    schema = v.object({ [key]: schema });
    data = { [key]: data };
  }
  let out: unknown = validate(schema, data, { file });
  for (const key of path) out = (out as Record<string, unknown>)[key];
  return out as StateRewardConfig;
}
