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
 *   full:     Σ_v π_v (log π_v − log π_ref,v), exact, from both models' logits
 */
import * as v from "valibot";
import * as torch from "../torch/index.ts";
import type { Tensor } from "../torch/index.ts";
import { aggregateLoss, expectSameShape, maskCount, maskedValues, rowsAndTokens, type LossAggMode } from "./aggregate.ts";
import type { LossMetrics } from "./metrics.ts";

export const KL_PENALTIES = ["kl", "k1", "abs", "mse", "k2", "low_var_kl", "k3", "full"] as const;
export type KlPenalty = (typeof KL_PENALTIES)[number];
/** The estimators that need only the sampled tokens' log-probs. */
export type SampledKlPenalty = Exclude<KlPenalty, "full">;

/**
 * Per-token KL estimate from the sampled tokens' log-probs:
 *   logProb, refLogProb: [B, T] -> [B, T]
 */
export function klPenalty(logProb: Tensor, refLogProb: Tensor, kind: SampledKlPenalty): Tensor {
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
        if ((kind as string) === "full") throw new Error(`kl_penalty "full" needs both models' logits: call fullKl(logits, refLogits)`);
        throw new Error(`kl_penalty: expected one of ${KL_PENALTIES.join(", ")}, got "${kind as string}"`);
    }
  });
}

/**
 * Exact KL(π ‖ π_ref) at every position from both models' logits, a chunk of positions at
 * a time (see entropy.ts for why):
 *   logits, refLogits: [B, T, V] -> [B, T], in f32 (f64 for f64 logits)
 */
export function fullKl(logits: Tensor, refLogits: Tensor, opts: { chunkTokens?: number } = {}): Tensor {
  const shape = logits.shape;
  if (shape.length !== 3) throw new Error(`fullKl logits: expected [rows, tokens, vocab], got shape [${shape.join(", ")}]`);
  expectSameShape({ logits, refLogits });
  const [rows, width, vocab] = shape as [number, number, number];
  const chunk = opts.chunkTokens ?? 1024;
  const dtype = logits.dtype === "f64" ? "f64" : "f32";
  return torch.tidy(() => {
    const flat = logits.reshape(-1, vocab);
    const flatRef = refLogits.reshape(-1, vocab);
    const pieces: Tensor[] = [];
    for (let start = 0; start < rows * width; start += chunk) {
      const len = Math.min(chunk, rows * width - start);
      const logp = flat.narrow(0, start, len).to({ dtype }).logSoftmax(-1);
      const logq = flatRef.narrow(0, start, len).to({ dtype }).logSoftmax(-1);
      pieces.push(logp.exp().mul(logp.sub(logq)).sum(-1));
    }
    if (pieces.length === 0) return torch.zeros([rows, width], { dtype, device: logits.device });
    return torch.cat(pieces).reshape(rows, width);
  });
}

/**
 * The KL loss term of the actor (use_kl_loss): coef · aggregate(kl, mask). `kl` is a
 * per-token estimate from klPenalty or fullKl; verl uses low_var_kl and coef 0.001.
 * Metrics: actor/kl_loss (the aggregated KL, before the coefficient), actor/kl_coef.
 */
export function klLoss(kl: Tensor, mask: Tensor, opts: { coef: number; lossAggMode?: LossAggMode }): { loss: Tensor; metrics: LossMetrics } {
  return torch.tidy(() => {
    const meanKl = aggregateLoss(kl, mask, opts.lossAggMode ?? "token-mean");
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
  opts: { kind: SampledKlPenalty; beta: number },
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

/** algorithm.kl_ctrl, as in verl. */
export const KlControlConfig = v.strictObject({
  type: v.optional(v.picklist(["fixed", "adaptive"], 'kl_ctrl.type: expected "fixed" or "adaptive"'), "fixed"),
  kl_coef: v.optional(v.pipe(v.number(), v.minValue(0, "kl_ctrl.kl_coef: expected a number >= 0")), 0.001),
  target_kl: v.optional(v.pipe(v.number(), v.gtValue(0, "kl_ctrl.target_kl: expected a number > 0")), 0.1),
  horizon: v.optional(v.pipe(v.number(), v.gtValue(0, "kl_ctrl.horizon: expected a number > 0")), 10000),
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
