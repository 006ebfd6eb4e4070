/**
 * The estimator registry: the properties VAGEN main declares, defaults, and the startup
 * refusals with errors that name the key and the expected value.
 */
import { describe, expect, test } from "bun:test";
import * as torch from "../../src/torch/index.ts";
import * as alg from "../../src/algorithms/index.ts";

const setup = (over: Partial<alg.EstimatorSetup>): alg.EstimatorSetup => ({
  estimator: "default_gae", useCritic: true, splitsEpisodeAcrossRows: false, source: "train.yaml", ...over,
});

describe("registered estimators", () => {
  test("properties as VAGEN main declares them (main 2026 §1.2)", () => {
    const flags = (name: string) => {
      const s = alg.getEstimator(name);
      return [s.needsCritic, s.spansRows, s.undiscounted, s.publishesTurnId, s.writesValueMask];
    };
    //                                       critic spans  undisc turnId valueMask
    expect(flags("default_gae")).toEqual([true, true, false, true, false]);
    expect(flags("token_level_gae")).toEqual([true, true, false, true, false]);
    expect(flags("turn_level_gae")).toEqual([true, true, false, true, true]);
    expect(flags("bi_level_gae")).toEqual([true, true, true, true, false]);
    expect(flags("trajectory_grpo")).toEqual([false, true, false, false, false]);
    expect(flags("gae")).toEqual([true, false, false, false, false]);
    expect(flags("grpo")).toEqual([false, false, false, false, false]);
    expect(flags("rloo")).toEqual([false, false, false, false, false]);
    expect(flags("gigpo")).toEqual([false, true, false, true, false]);
    expect(alg.DEFAULT_ESTIMATOR).toBe("default_gae");
  });

  test("defaults: main's algorithm.* values; high_level_gamma follows gamma", () => {
    const p = alg.resolveAlgorithmParams({});
    expect([p.gamma, p.lam, p.ignore_return, p.norm_adv_by_std_in_grpo]).toEqual([1, 1, -100, true]);
    expect([p.gamma_turn, p.lambda_turn, p.lambda_token, p.bi_level_mix]).toEqual([0.95, 0.95, 1.0, 0.75]);
    expect(alg.resolveAlgorithmParams({ gamma: 0.9 }).high_level_gamma).toBe(0.9);
    expect(alg.resolveAlgorithmParams({ gamma: null }).gamma).toBe(1); // null means "use the default", as main
  });

  test("bi_level_gae's defaults equal explicit (0.95, 0.95, 1.0, 0.75)", () => torch.tidy(() => {
    const batch: alg.AdvantageBatch = {
      tokenLevelRewards: torch.tensor([[0, 1, 0, 0.5, 2]], undefined, { dtype: "f64" }),
      responseMask: torch.tensor([[1, 1, 0, 1, 1]], undefined, { dtype: "f64" }),
      values: torch.tensor([[0.2, 0.1, 0, 0.4, 0.3]], undefined, { dtype: "f64" }),
      groupIds: ["g"],
    };
    const implicit = alg.computeAdvantages(alg.validateEstimatorSetup(setup({ estimator: "bi_level_gae" })), batch);
    const explicit = alg.biLevelGae(batch, { gammaTurn: 0.95, lambdaTurn: 0.95, lambdaToken: 1, biLevelMix: 0.75 });
    expect(Array.from(implicit.returns.toFloat64Array())).toEqual(Array.from(explicit.returns.toFloat64Array()));
  }));
});

describe("startup refusals", () => {
  test("an unknown estimator, with the closest name", () => {
    expect(() => alg.validateEstimatorSetup(setup({ estimator: "defualt_gae" }))).toThrow(
      /train.yaml: key "algorithm.adv_estimator": got "defualt_gae", expected one of default_gae, .*did you mean "default_gae"/,
    );
  });

  test("verl's per-row estimators when the harness splits episodes across rows", () => {
    for (const estimator of ["gae", "grpo", "rloo"]) {
      expect(() => alg.validateEstimatorSetup(setup({ estimator, splitsEpisodeAcrossRows: true }))).toThrow(
        new RegExp(`key "algorithm.adv_estimator": got "${estimator}", expected an estimator that stitches an episode's rows`),
      );
      expect(() => alg.validateEstimatorSetup(setup({ estimator, splitsEpisodeAcrossRows: false }))).not.toThrow();
    }
    expect(() => alg.validateEstimatorSetup(setup({ estimator: "trajectory_grpo", useCritic: false, splitsEpisodeAcrossRows: true }))).not.toThrow();
  });

  test("a critic estimator without a critic", () => {
    expect(() => alg.validateEstimatorSetup(setup({ estimator: "turn_level_gae", useCritic: false }))).toThrow(
      /key "critic.enable": got false, expected true, because estimator "turn_level_gae" needs a critic/,
    );
    expect(() => alg.validateEstimatorSetup(setup({ estimator: "grpo", useCritic: false }))).not.toThrow();
  });

  test("an undiscounted estimator with gamma != 1", () => {
    expect(() => alg.validateEstimatorSetup(setup({ estimator: "bi_level_gae", params: { gamma: 0.99 } }))).toThrow(
      /key "algorithm.gamma": got 0.99, expected 1.0, because estimator "bi_level_gae" is undiscounted/,
    );
  });

  test("a turn-level policy loss with an estimator that publishes no turn ids", () => {
    expect(() => alg.validateEstimatorSetup(setup({ estimator: "trajectory_grpo", useCritic: false, policyLossMode: "turn_gspo" }))).toThrow(
      /key "actor.policy_loss.loss_mode": got "turn_gspo", which needs turn ids, but estimator "trajectory_grpo" publishes none/,
    );
    expect(() => alg.validateEstimatorSetup(setup({ policyLossMode: "turn_ppo" }))).not.toThrow();
  });

  test("parameters outside their range, non-finite, of the wrong type, or unknown", () => {
    const refuse = (params: Record<string, unknown>, message: RegExp) =>
      expect(() => alg.validateEstimatorSetup(setup({ estimator: "bi_level_gae", params: { gamma: 1, ...params } }))).toThrow(message);
    refuse({ gamma: 1.5 }, /train.yaml: key "algorithm.gamma": got 1.5 \(number\), expected a finite number in \[0, 1\]/);
    refuse({ lam: -0.1 }, /key "algorithm.lam": got -0.1 \(number\), expected a finite number in \[0, 1\]/);
    refuse({ gamma_turn: 1.01 }, /key "algorithm.gamma_turn": got 1.01 \(number\), expected a finite number in \[0, 1\]/);
    refuse({ lambda_turn: Number.POSITIVE_INFINITY }, /key "algorithm.lambda_turn": .*expected a finite number in \[0, 1\]/);
    refuse({ lambda_token: Number.NaN }, /key "algorithm.lambda_token"/);
    refuse({ bi_level_mix: 2 }, /key "algorithm.bi_level_mix": got 2 \(number\), expected a finite number in \[0, 1\]/);
    refuse({ high_level_gamma: -1 }, /key "algorithm.high_level_gamma": got -1/);
    refuse({ step_advantage_w: -1 }, /key "algorithm.step_advantage_w": got -1 \(number\), expected a finite number >= 0/);
    refuse({ norm_adv_by_std_in_grpo: "yes" }, /key "algorithm.norm_adv_by_std_in_grpo": got "yes"/);
    refuse({ gigpo_mode: "std" }, /key "algorithm.gigpo_mode": got "std"/);
    refuse({ gama: 0.9 }, /unknown key "algorithm.gama" \(did you mean "gamma"\?\)/);
  });

  test("a critic estimator run without values", () => torch.tidy(() => {
    const batch: alg.AdvantageBatch = { tokenLevelRewards: torch.zeros([1, 2]), responseMask: torch.ones([1, 2]), groupIds: ["g"] };
    expect(() => alg.computeAdvantages(alg.validateEstimatorSetup(setup({})), batch)).toThrow(/"default_gae" needs critic values/);
  }));
});
