/**
 * The advantage-estimator registry: every estimator by name with the properties the
 * trainer checks at startup (VAGEN main 2026 §1.1-1.2), its knobs, and the startup
 * refusals.
 *
 * Knobs live in the config's `algorithm` section with VAGEN's names (snake_case):
 * `algorithm.gamma`, `algorithm.lam`, `algorithm.gamma_turn`, ... One schema covers them
 * all; each estimator reads the ones it needs and ignores the rest, as main does.
 */
import * as v from "valibot";
import { VagenError } from "../core/errors.ts";
import { didYouMean } from "../config/suggest.ts";
import { validate } from "../config/validate.ts";
import type { AdvantageBatch, AdvantageOutput } from "./estimators/types.ts";
import { defaultGae } from "./estimators/default-gae.ts";
import { tokenLevelGae } from "./estimators/token-level-gae.ts";
import { turnLevelGae } from "./estimators/turn-level-gae.ts";
import { biLevelGae } from "./estimators/bi-level-gae.ts";
import { trajectoryGrpo } from "./estimators/trajectory-grpo.ts";
import { verlGae } from "./estimators/verl-gae.ts";
import { verlGrpo } from "./estimators/verl-grpo.ts";
import { rloo } from "./estimators/rloo.ts";
import { biLevelGaePaper } from "./estimators/bi-level-gae-paper.ts";
import { maskedGae } from "./estimators/masked-gae.ts";
import { turnWiseGae } from "./estimators/turn-wise-gae.ts";
import { gigpo } from "./estimators/gigpo.ts";

const unitInterval = v.pipe(
  v.number(),
  v.check((x) => Number.isFinite(x) && x >= 0 && x <= 1, "a finite number in [0, 1]"),
);
const finite = v.pipe(v.number(), v.check((x) => Number.isFinite(x), "a finite number"));
const nonNegative = v.pipe(v.number(), v.check((x) => Number.isFinite(x) && x >= 0, "a finite number >= 0"));

/** The `algorithm.*` knobs the estimators read; a missing (or null) key takes its default. */
export const algorithmParamsSchema = v.strictObject({
  /** Discount per step of the estimator's clock (token or turn); 1.0 in VAGEN's config. */
  gamma: v.optional(v.nullable(unitInterval), 1.0),
  /** GAE lambda. */
  lam: v.optional(v.nullable(unitInterval), 1.0),
  /** turn_level_gae: the returns sentinel where the critic is not trained. */
  ignore_return: v.optional(v.nullable(finite), -100.0),
  /** GRPO family: divide by the group std. */
  norm_adv_by_std_in_grpo: v.optional(v.nullable(v.boolean()), true),
  /** bi_level_gae: discount charged once per turn. */
  gamma_turn: v.optional(v.nullable(unitInterval), 0.95),
  /** bi_level_gae: lambda at turn boundaries. */
  lambda_turn: v.optional(v.nullable(unitInterval), 0.95),
  /** bi_level_gae: lambda inside a turn. */
  lambda_token: v.optional(v.nullable(unitInterval), 1.0),
  /** bi_level_gae: weight of the bi-level advantage against token-level GAE. */
  bi_level_mix: v.optional(v.nullable(unitInterval), 0.75),
  /** bi_level_gae_paper, turn_wise_gae: discount between turns; defaults to gamma. */
  high_level_gamma: v.optional(v.nullable(unitInterval)),
  /** gigpo: omega, the weight of the step-level advantage. */
  step_advantage_w: v.optional(v.nullable(nonNegative), 1.0),
  /** gigpo: "mean_norm" (centre only) or "mean_std_norm" (centre and divide by std). */
  gigpo_mode: v.optional(v.nullable(v.picklist(["mean_norm", "mean_std_norm"])), "mean_norm"),
});

/** Resolved knobs: every key present. */
export interface AlgorithmParams {
  gamma: number;
  lam: number;
  ignore_return: number;
  norm_adv_by_std_in_grpo: boolean;
  gamma_turn: number;
  lambda_turn: number;
  lambda_token: number;
  bi_level_mix: number;
  high_level_gamma: number;
  step_advantage_w: number;
  gigpo_mode: "mean_norm" | "mean_std_norm";
}

export interface EstimatorSpec {
  name: string;
  /** One line for listings. */
  summary: string;
  /** Reads values; the trainer must run a critic. */
  needsCritic: boolean;
  /** Stitches an episode's rows back together (main's TRAJECTORY_ESTIMATORS); otherwise it works per row and is refused when episodes span rows. */
  spansRows: boolean;
  /** Only valid at algorithm.gamma = 1 (it keeps its own clock). */
  undiscounted: boolean;
  /** Writes turn ids (needed by turn_gspo / turn_ppo losses). */
  publishesTurnId: boolean;
  /** Writes a value mask: the critic is trained on a subset of the model tokens. */
  writesValueMask: boolean;
  /** The `algorithm.*` knobs it reads. */
  reads: readonly (keyof AlgorithmParams)[];
  run(batch: AdvantageBatch, params: AlgorithmParams): AdvantageOutput;
}

type Flags = Omit<EstimatorSpec, "name" | "summary" | "reads" | "run">;
const TRAJECTORY_GAE: Flags = { needsCritic: true, spansRows: true, undiscounted: false, publishesTurnId: true, writesValueMask: false };
const TRAJECTORY_OUTCOME: Flags = { needsCritic: false, spansRows: true, undiscounted: false, publishesTurnId: true, writesValueMask: false };
const VERL_PER_ROW: Flags = { needsCritic: false, spansRows: false, undiscounted: false, publishesTurnId: false, writesValueMask: false };

const SPECS: readonly EstimatorSpec[] = [
  {
    name: "default_gae", summary: "token GAE with the episode's reward lumped at its last token (VAGEN's default)",
    ...TRAJECTORY_GAE, reads: ["gamma", "lam"],
    run: (batch, p) => defaultGae(batch, { gamma: p.gamma, lam: p.lam }),
  },
  {
    name: "token_level_gae", summary: "token GAE with rewards where they were placed",
    ...TRAJECTORY_GAE, reads: ["gamma", "lam"],
    run: (batch, p) => tokenLevelGae(batch, { gamma: p.gamma, lam: p.lam }),
  },
  {
    name: "turn_level_gae", summary: "GAE over turns, value anchored at each turn's first token",
    ...TRAJECTORY_GAE, writesValueMask: true, reads: ["gamma", "lam", "ignore_return"],
    run: (batch, p) => turnLevelGae(batch, { gamma: p.gamma, lam: p.lam, ignoreReturn: p.ignore_return }),
  },
  {
    name: "bi_level_gae", summary: "variable-clock bi-level GAE: gamma_turn once per turn, mixed with token GAE",
    ...TRAJECTORY_GAE, undiscounted: true, reads: ["gamma_turn", "lambda_turn", "lambda_token", "bi_level_mix"],
    run: (batch, p) => biLevelGae(batch, { gammaTurn: p.gamma_turn, lambdaTurn: p.lambda_turn, lambdaToken: p.lambda_token, biLevelMix: p.bi_level_mix }),
  },
  {
    name: "trajectory_grpo", summary: "GRPO over whole episodes (population std, flat groups get 0)",
    ...TRAJECTORY_OUTCOME, publishesTurnId: false, reads: ["norm_adv_by_std_in_grpo"],
    run: (batch, p) => trajectoryGrpo(batch, { normAdvByStd: p.norm_adv_by_std_in_grpo }),
  },
  {
    name: "gae", summary: "verl's token GAE per row",
    ...VERL_PER_ROW, needsCritic: true, reads: ["gamma", "lam"],
    run: (batch, p) => verlGae(batch, { gamma: p.gamma, lam: p.lam }),
  },
  {
    name: "grpo", summary: "verl's outcome GRPO per row",
    ...VERL_PER_ROW, reads: ["norm_adv_by_std_in_grpo"],
    run: (batch, p) => verlGrpo(batch, { normAdvByStd: p.norm_adv_by_std_in_grpo }),
  },
  {
    name: "rloo", summary: "verl's leave-one-out baseline per row",
    ...VERL_PER_ROW, reads: [],
    run: (batch) => rloo(batch),
  },
  {
    name: "bi_level_gae_paper", summary: "the paper's two-pass Bi-Level GAE (turn pass with high_level_gamma, then token pass)",
    ...TRAJECTORY_GAE, reads: ["gamma", "lam", "high_level_gamma"],
    run: (batch, p) => biLevelGaePaper(batch, { gamma: p.gamma, lam: p.lam, highLevelGamma: p.high_level_gamma }),
  },
  {
    name: "masked_gae", summary: "the paper's VAGEN-Base GAE over model tokens",
    ...TRAJECTORY_GAE, reads: ["gamma", "lam"],
    run: (batch, p) => maskedGae(batch, { gamma: p.gamma, lam: p.lam }),
  },
  {
    name: "turn_wise_gae", summary: "the paper's turn-level GAE, value at each turn's last token",
    ...TRAJECTORY_GAE, writesValueMask: true, reads: ["lam", "high_level_gamma"],
    run: (batch, p) => turnWiseGae(batch, { lam: p.lam, highLevelGamma: p.high_level_gamma }),
  },
  {
    name: "gigpo", summary: "GiGPO: episode groups plus step groups of identical anchor states",
    ...TRAJECTORY_OUTCOME, reads: ["gamma", "step_advantage_w", "gigpo_mode"],
    run: (batch, p) => gigpo(batch, { gamma: p.gamma, stepAdvantageWeight: p.step_advantage_w, normalizeByStd: p.gigpo_mode === "mean_std_norm" }),
  },
];

const BY_NAME = new Map(SPECS.map((s) => [s.name, s]));

/** The default estimator (VAGEN main's yaml default). */
export const DEFAULT_ESTIMATOR = "default_gae";

export function estimatorNames(): string[] {
  return SPECS.map((s) => s.name);
}

export function getEstimator(name: string): EstimatorSpec {
  const spec = BY_NAME.get(name);
  if (!spec) throw unknownEstimator(name, "config");
  return spec;
}

/** Fills defaults and range-checks `algorithm.*` knobs; throws naming the key and the expected value. */
export function resolveAlgorithmParams(params: Record<string, unknown> = {}, source = "config"): AlgorithmParams {
  const { algorithm } = validate(v.object({ algorithm: algorithmParamsSchema }), { algorithm: params }, { file: source });
  const gamma = algorithm.gamma ?? 1.0;
  return {
    gamma,
    lam: algorithm.lam ?? 1.0,
    ignore_return: algorithm.ignore_return ?? -100.0,
    norm_adv_by_std_in_grpo: algorithm.norm_adv_by_std_in_grpo ?? true,
    gamma_turn: algorithm.gamma_turn ?? 0.95,
    lambda_turn: algorithm.lambda_turn ?? 0.95,
    lambda_token: algorithm.lambda_token ?? 1.0,
    bi_level_mix: algorithm.bi_level_mix ?? 0.75,
    high_level_gamma: algorithm.high_level_gamma ?? gamma,
    step_advantage_w: algorithm.step_advantage_w ?? 1.0,
    gigpo_mode: algorithm.gigpo_mode ?? "mean_norm",
  };
}

/** What the trainer knows at startup about the estimator it is asked to run. */
export interface EstimatorSetup {
  /** algorithm.adv_estimator */
  estimator: string;
  /** algorithm.* knobs, with VAGEN's names. */
  params?: Record<string, unknown>;
  /** critic.enable */
  useCritic: boolean;
  /** The harness splits one episode across several rows (no_concat, compact, and any custom harness unless it says otherwise). */
  splitsEpisodeAcrossRows: boolean;
  /** actor.policy_loss.loss_mode, when known. */
  policyLossMode?: string;
  /** Where the setup came from (a config file), for messages. */
  source?: string;
}

export interface ResolvedEstimator {
  spec: EstimatorSpec;
  params: AlgorithmParams;
}

const TURN_LOSSES = new Set(["turn_gspo", "turn_ppo"]);

/**
 * VAGEN main's startup refusals (§1.1): an unknown name, bad knobs, a per-row estimator
 * when episodes span rows, a critic estimator without a critic, an undiscounted
 * estimator with gamma != 1, a turn-level loss without turn ids.
 */
export function validateEstimatorSetup(setup: EstimatorSetup): ResolvedEstimator {
  const where = setup.source ?? "config";
  const spec = BY_NAME.get(setup.estimator);
  if (!spec) throw unknownEstimator(setup.estimator, where);
  const params = resolveAlgorithmParams(setup.params, where);

  if (setup.splitsEpisodeAcrossRows && !spec.spansRows) {
    const stitching = SPECS.filter((s) => s.spansRows).map((s) => s.name).join(", ");
    throw new VagenError(
      `${where}: key "algorithm.adv_estimator": got "${spec.name}", expected an estimator that stitches an episode's rows (${stitching}), because the harness splits episodes across rows and "${spec.name}" works per row`,
      "use the concat harness, or an estimator from the list",
    );
  }
  if (spec.needsCritic && !setup.useCritic) {
    throw new VagenError(`${where}: key "critic.enable": got false, expected true, because estimator "${spec.name}" needs a critic`);
  }
  if (spec.undiscounted && params.gamma !== 1) {
    throw new VagenError(
      `${where}: key "algorithm.gamma": got ${params.gamma}, expected 1.0, because estimator "${spec.name}" is undiscounted in token time (it discounts per turn with ${spec.reads.filter((k) => k.startsWith("gamma")).join(", ")})`,
    );
  }
  if (setup.policyLossMode !== undefined && TURN_LOSSES.has(setup.policyLossMode) && !spec.publishesTurnId) {
    const publishing = SPECS.filter((s) => s.publishesTurnId).map((s) => s.name).join(", ");
    throw new VagenError(
      `${where}: key "actor.policy_loss.loss_mode": got "${setup.policyLossMode}", which needs turn ids, but estimator "${spec.name}" publishes none; expected an estimator that does (${publishing})`,
    );
  }
  return { spec, params };
}

/** Runs a resolved estimator; a critic estimator must be given values. */
export function computeAdvantages(resolved: ResolvedEstimator, batch: AdvantageBatch): AdvantageOutput {
  if (resolved.spec.needsCritic && !batch.values) {
    throw new Error(`estimator "${resolved.spec.name}" needs critic values; the batch has none`);
  }
  return resolved.spec.run(batch, resolved.params);
}

function unknownEstimator(name: string, where: string): VagenError {
  const names = estimatorNames();
  return new VagenError(`${where}: key "algorithm.adv_estimator": got "${name}", expected one of ${names.join(", ")}${didYouMean(name, names)}`);
}
