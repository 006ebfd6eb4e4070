/**
 * KL between the policy and a reference policy (verl kl_penalty, the controllers, the KL
 * loss and the KL-in-reward penalty). With samples drawn from π and
 * ρ = logπ − logπ_ref per token, the estimators of KL(π ‖ π_ref) are (Schulman, "Approximating
 * KL divergence"):
 *   kl  (k1): ρ                         unbiased, high variance, can be negative
 *   abs:      |ρ|
 *   mse (k2): ½ρ²
 *   low_var_kl (k3): e^{−ρ} + ρ − 1      unbiased and ≥ 0; −ρ clamped to [−20, 20] and the
 *                                        result to [−10, 10], as verl does
 * verl's `full` (the exact KL from both models' whole distributions) is not offered: the
 * trainer keeps per-token log-probs, not [B, T, vocab] logits of two models.
 */
import * as v from "valibot";
import * as torch from "../torch/index.ts";
import type { Tensor } from "../torch/index.ts";
import { aggregateLoss, expectSameShape, maskCount, maskedValues, rowsAndTokens, type LossAggMode, type LossNormalizer } from "./aggregate.ts";
import type { LossMetrics } from "./metrics.ts";

export const KL_PENALTIES = ["kl", "k1", "abs", "mse", "k2", "low_var_kl", "k3"] as const;
export type KlPenalty = (typeof KL_PENALTIES)[number];

/**
 * Per-token KL estimate from the sampled tokens' log-probs:
 *   logProb, refLogProb: [B, T] -> [B, T]
 */
export function klPenalty(logProb: Tensor, refLogProb: Tensor, kind: KlPenalty): Tensor {
  expectSameShape({ logProb, refLogProb });
  return torch.tidy(() => {
    switch (kind) {
      case "kl":
      case "k1":
        return logProb.sub(refLogProb);
      case "abs":
        return logProb.sub(refLogProb).abs();
      case "mse":
      case "k2":
        return logProb.sub(refLogProb).square().mul(0.5);
      case "low_var_kl":
      case "k3": {
        const refMinusPolicy = refLogProb.sub(logProb).clamp(-20, 20);
        return refMinusPolicy.exp().sub(refMinusPolicy).sub(1).clamp(-10, 10);
      }
      default:
        throw new Error(`kl_penalty: expected one of ${KL_PENALTIES.join(", ")}, got "${kind as string}"`);
    }
  });
}

/**
 * The KL loss term of the actor (use_kl_loss): coef · aggregate(kl, mask), the coefficient
 * applied here and only here. `kl` is a per-token estimate from klPenalty; verl uses
 * low_var_kl and coef 0.001.
 *   kl, mask: [B, T]; normalizer: the mini-batch's counts (see aggregateLoss)
 * Metrics: actor/kl_loss (the aggregated KL, before the coefficient), actor/kl_coef.
 */
export function klLoss(kl: Tensor, mask: Tensor, opts: { coef: number; lossAggMode?: LossAggMode; normalizer?: LossNormalizer }): { loss: Tensor; metrics: LossMetrics } {
  return torch.tidy(() => {
    const meanKl = aggregateLoss(kl, mask, opts.lossAggMode ?? "token-mean", opts.normalizer);
    return {
      loss: meanKl.mul(opts.coef),
      metrics: { "actor/kl_loss": meanKl.detach(), "actor/kl_coef": torch.scalarTensor(opts.coef, { dtype: kl.dtype }) },
    };
  });
}

export interface KlRewardResult {
  /** [B, T] scores − β·kl·mask. */
  tokenLevelRewards: Tensor;
  /** The batch's KL (mean over rows of each row's masked token mean), what the controller is updated with. */
  currentKl: number;
  /** actor/reward_kl_penalty (= currentKl) and actor/reward_kl_penalty_coeff (= β). */
  metrics: Record<string, number>;
}

/**
 * KL in the reward (use_kl_in_reward, verl apply_kl_penalty):
 *   token_level_rewards = token_level_scores − β · kl_penalty(old, ref) · mask
 * with β the controller's current value. Runs without gradients. The caller then calls
 * controller.update(currentKl, batchRows).
 */
export function applyKlPenalty(
  inputs: { tokenLevelScores: Tensor; oldLogProb: Tensor; refLogProb: Tensor; responseMask: Tensor },
  opts: { kind: KlPenalty; beta: number },
): KlRewardResult {
  const { tokenLevelScores, oldLogProb, refLogProb, responseMask } = inputs;
  rowsAndTokens(tokenLevelScores, "applyKlPenalty tokenLevelScores");
  expectSameShape({ tokenLevelScores, oldLogProb, refLogProb, responseMask });
  return torch.noGrad(() =>
    torch.tidy(() => {
      const kl = maskedValues(klPenalty(oldLogProb, refLogProb, opts.kind), responseMask).to({ dtype: tokenLevelScores.dtype });
      const rewards = tokenLevelScores.sub(kl.mul(opts.beta));
      // verl: masked mean per row (an empty row counts as 0), then the mean over rows
      const perRow = kl.sum(-1).div(maskCount(responseMask, kl, -1).clampMin(1));
      const currentKl = perRow.numel() === 0 ? 0 : perRow.mean().item();
      return {
        tokenLevelRewards: rewards,
        currentKl,
        metrics: { "actor/reward_kl_penalty": currentKl, "actor/reward_kl_penalty_coeff": opts.beta },
      };
    }),
  );
}

// ---- KL coefficient controllers -----------------------------------------------------

/**
 * algorithm.kl_ctrl, as in verl: the one schema of the controller, which the train config
 * embeds, so whatever the config accepts the controller takes.
 */
export const KlControlConfig = v.strictObject({
  type: v.optional(v.picklist(["fixed", "adaptive"], 'expected "fixed" or "adaptive"'), "fixed"),
  kl_coef: v.optional(v.pipe(v.number(), v.check((x) => Number.isFinite(x) && x >= 0, "expected a finite number >= 0")), 0.001),
  /** The adaptive controller's target KL; it divides by it. */
  target_kl: v.optional(v.pipe(v.number(), v.check((x) => Number.isFinite(x) && x > 0, "expected a finite number > 0")), 0.1),
  horizon: v.optional(v.pipe(v.number(), v.check((x) => Number.isFinite(x) && x > 0, "expected a finite number > 0")), 10000),
});
export type KlControlConfig = v.InferOutput<typeof KlControlConfig>;

export interface KlController {
  /** The current β. */
  readonly value: number;
  /** Called once per step with the batch's KL and the number of rows it came from. */
  update(currentKl: number, nSteps: number): void;
}

/** β stays at its initial value. */
export class FixedKlController implements KlController {
  constructor(readonly value: number) {}
  update(): void {}
}

/**
 * Ziegler et al. (2019): β is multiplied by 1 + clip(kl / target − 1, −0.2, 0.2) · n / horizon,
 * so it rises while the KL overshoots the target and falls while it undershoots.
 */
export class AdaptiveKlController implements KlController {
  value: number;
  constructor(
    initKlCoef: number,
    readonly targetKl: number,
    readonly horizon: number,
  ) {
    this.value = initKlCoef;
  }
  update(currentKl: number, nSteps: number): void {
    const proportionalError = Math.min(0.2, Math.max(-0.2, currentKl / this.targetKl - 1));
    this.value *= 1 + (proportionalError * nSteps) / this.horizon;
  }
}

/** Builds the controller algorithm.kl_ctrl describes (validated; unknown keys are errors). */
export function createKlController(config: unknown = {}): KlController {
  const parsed = v.safeParse(KlControlConfig, config);
  if (!parsed.success) {
    const issue = parsed.issues[0];
    const path = issue.path?.map((p) => String(p.key)).join(".") ?? "";
    throw new Error(`algorithm.kl_ctrl${path ? "." + path : ""}: ${issue.message}`);
  }
  const c = parsed.output;
  return c.type === "fixed" ? new FixedKlController(c.kl_coef) : new AdaptiveKlController(c.kl_coef, c.target_kl, c.horizon);
}
