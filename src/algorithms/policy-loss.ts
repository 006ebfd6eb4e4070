/**
 * Policy (actor) losses: PPO's clipped surrogate with dual clip, GSPO's sequence-level
 * ratio, and VAGEN main's turn-level `turn_gspo` / `turn_ppo`. Semantics and metric names
 * follow verl's core_algos (compute_policy_loss_vanilla, compute_policy_loss_gspo) and
 * VAGEN's turn_gspo loss.
 *
 * Inputs are per-token [B, T] tensors; `logProb` carries the gradient, everything else is
 * data. Each loss returns the scalar to backpropagate and detached 0-d metrics.
 */
import * as torch from "../torch/index.ts";
import type { Tensor } from "../torch/index.ts";
import { aggregateLoss, expectSameShape, maskBool, maskCount, maskedMean, maskedValues, rowsAndTokens, type LossAggMode, type LossNormalizer } from "./aggregate.ts";
import type { LossMetrics } from "./metrics.ts";

export const POLICY_LOSS_MODES = ["vanilla", "gspo", "turn_gspo", "turn_ppo"] as const;
export type PolicyLossMode = (typeof POLICY_LOSS_MODES)[number];

export interface PolicyLossInputs {
  /** [B, T] log π_θ of the sampled tokens under the policy being trained (differentiable). */
  logProb: Tensor;
  /** [B, T] log π_old of the same tokens, from before this update. */
  oldLogProb: Tensor;
  /** [B, T] advantage of each token. */
  advantages: Tensor;
  /** [B, T] 0/1: the tokens the model generated and the loss should see. */
  responseMask: Tensor;
  /** [B, T] integer turn id per token (-1 where no turn); needed by turn_gspo / turn_ppo. */
  turnIds?: Tensor;
  /** [B, T] detached rollout-mismatch weights (see mismatch.ts), multiplied into each token's loss. */
  rolloutIsWeights?: Tensor;
}

export interface ClipRange {
  /** ε of PPO's clip(ratio, 1 − ε, 1 + ε); verl default 0.2. */
  clipRatio?: number;
  /** Lower ε (default clipRatio). */
  clipRatioLow?: number;
  /** Upper ε (default clipRatio); DAPO's "clip higher" raises this one. */
  clipRatioHigh?: number;
}

export interface PolicyLossOptions extends ClipRange {
  /** Dual-clip bound for negative advantages (vanilla only); must be > 1; verl default 3. */
  clipRatioC?: number;
  /** Aggregation for vanilla (default token-mean); gspo always uses seq-mean-token-mean, the turn losses their own. */
  lossAggMode?: LossAggMode;
  /**
   * The mini-batch's token and row counts the loss is divided by (see aggregateLoss);
   * default this batch's own. Pass the mini-batch's when this batch is one micro-batch of it.
   */
  normalizer?: LossNormalizer;
}

export interface PolicyLossResult {
  /** 0-d loss to backpropagate. */
  loss: Tensor;
  /** actor/pg_loss, actor/pg_clipfrac, actor/ppo_kl, actor/pg_clipfrac_lower, actor/ratio_{mean,max,min}, and for turn losses actor/turns_per_row, actor/turn_len_mean, actor/turn_log_ratio_std. */
  metrics: LossMetrics;
}

/** Picks the loss by its verl / VAGEN name (actor.policy_loss.loss_mode). */
export function policyLoss(mode: PolicyLossMode, inputs: PolicyLossInputs, opts: PolicyLossOptions = {}): PolicyLossResult {
  switch (mode) {
    case "vanilla":
      return ppoClipLoss(inputs, opts);
    case "gspo":
      return gspoLoss(inputs, opts);
    case "turn_gspo":
    case "turn_ppo":
      return turnPolicyLoss(mode, inputs, opts);
    default:
      throw new Error(`policy_loss.loss_mode: expected one of ${POLICY_LOSS_MODES.join(", ")}, got "${mode as string}"`);
  }
}

function clipBounds(opts: ClipRange): { low: number; high: number } {
  const eps = opts.clipRatio ?? 0.2;
  const low = opts.clipRatioLow ?? eps;
  const high = opts.clipRatioHigh ?? eps;
  if (!(low >= 0 && low < 1)) throw new Error(`clip_ratio_low: expected a number in [0, 1), got ${low}`);
  if (!(high >= 0)) throw new Error(`clip_ratio_high: expected a number >= 0, got ${high}`);
  return { low, high };
}

function checkInputs(inputs: PolicyLossInputs, what: string): void {
  rowsAndTokens(inputs.logProb, `${what} logProb`);
  expectSameShape({
    logProb: inputs.logProb,
    oldLogProb: inputs.oldLogProb,
    advantages: inputs.advantages,
    responseMask: inputs.responseMask,
    turnIds: inputs.turnIds,
    rolloutIsWeights: inputs.rolloutIsWeights,
  });
}

/** Masked mean, max and min of a positive ratio; 0 for all three when the mask is empty. */
function ratioStats(ratio: Tensor, mask: Tensor): LossMetrics {
  return torch.tidy(() => {
    const r = ratio.detach();
    const any = maskBool(mask).any();
    const max = torch.where(any, maskedValues(r, mask).max(), 0);
    const min = torch.where(any, torch.where(maskBool(mask), r, Infinity).min(), 0);
    return { "actor/ratio_mean": maskedMean(r, mask), "actor/ratio_max": max, "actor/ratio_min": min };
  });
}

/**
 * PPO's clipped surrogate with dual clip (verl "vanilla"):
 *   ρ = logπ − logπ_old, clamped to [−20, 20]; ratio = exp(ρ)
 *   ℓ = max(−A·ratio, −A·clip(ratio, 1 − ε_low, 1 + ε_high))
 *   for A < 0 additionally ℓ = min(ℓ, −A·clip_ratio_c)   (dual clip: bounds the loss when
 *   the ratio explodes on a bad action)
 * then ℓ × rolloutIsWeights, aggregated with lossAggMode (default token-mean).
 * Metrics: pg_clipfrac = share of tokens where the clipped branch is larger; pg_clipfrac_lower
 * = share where the dual clip binds (A < 0); ppo_kl = masked mean of −ρ.
 */
export function ppoClipLoss(inputs: PolicyLossInputs, opts: PolicyLossOptions = {}): PolicyLossResult {
  checkInputs(inputs, "ppoClipLoss");
  const { low, high } = clipBounds(opts);
  const clipRatioC = opts.clipRatioC ?? 3;
  if (!(clipRatioC > 1)) throw new Error(`clip_ratio_c: expected a number > 1 (dual-clip PPO), got ${clipRatioC}`);
  const { logProb, oldLogProb, advantages: A, responseMask: mask } = inputs;
  return torch.tidy(() => {
    const logRatio = logProb.sub(oldLogProb).clamp(-20, 20);
    const ratio = logRatio.exp();
    const unclipped = A.neg().mul(ratio);
    const clipped = A.neg().mul(ratio.clamp(1 - low, 1 + high));
    const clipLoss = unclipped.maximum(clipped);
    const dualBound = A.neg().mul(clipRatioC);
    const negative = A.lt(0);
    let tokenLoss = torch.where(negative, clipLoss.minimum(dualBound), clipLoss);
    if (inputs.rolloutIsWeights) tokenLoss = tokenLoss.mul(inputs.rolloutIsWeights);
    const loss = aggregateLoss(tokenLoss, mask, opts.lossAggMode ?? "token-mean", opts.normalizer);
    return {
      loss,
      metrics: torch.noGrad(() => ({
        "actor/pg_loss": loss.detach(),
        "actor/pg_clipfrac": maskedMean(clipped.gt(unclipped).to({ dtype: logProb.dtype }), mask),
        "actor/ppo_kl": maskedMean(logRatio.neg(), mask),
        "actor/pg_clipfrac_lower": maskedMean(clipLoss.gt(dualBound).logicalAnd(negative).to({ dtype: logProb.dtype }), mask),
        ...ratioStats(ratio, mask),
      })),
    };
  });
}

/**
 * Clipped surrogate on a ratio that is shared by a group of tokens (a row for GSPO, a turn
 * for turn_gspo / turn_ppo), in GSPO's "token" form:
 *   log w_j = min(10, logπ_j − sg(logπ_j) + sg(log s_group(j)))
 * Numerically w_j = s_group; its gradient is s_group·∇logπ_j, so advantages may differ per
 * token while the ratio and the clip decision belong to the group.
 * Returns the per-token loss max(−A·w, −A·clip(w, 1 − ε_low, 1 + ε_high)) and w.
 */
function groupRatioSurrogate(logProb: Tensor, groupLogRatio: Tensor, A: Tensor, low: number, high: number) {
  return torch.tidy(() => {
    const logW = logProb.sub(logProb.detach()).add(groupLogRatio.detach()).clampMax(10);
    const w = logW.exp();
    const unclipped = A.neg().mul(w);
    const clipped = A.neg().mul(w.clamp(1 - low, 1 + high));
    return { tokenLoss: unclipped.maximum(clipped), clippedWins: clipped.gt(unclipped), w };
  });
}

/**
 * GSPO (verl compute_policy_loss_gspo): one ratio per row, the geometric mean of its
 * token ratios, s_b = exp(mean over masked tokens of ρ); clipped as in
 * groupRatioSurrogate; always aggregated seq-mean-token-mean. No dual clip;
 * pg_clipfrac_lower is 0.
 */
export function gspoLoss(inputs: PolicyLossInputs, opts: PolicyLossOptions = {}): PolicyLossResult {
  checkInputs(inputs, "gspoLoss");
  const { low, high } = clipBounds(opts);
  const { logProb, oldLogProb, advantages: A, responseMask: mask } = inputs;
  return torch.tidy(() => {
    const logRatio = logProb.sub(oldLogProb);
    const rowLogRatio = maskedValues(logRatio, mask).sum(-1).div(maskCount(mask, logRatio, -1).clampMin(1)); // [B]
    const { tokenLoss: raw, clippedWins, w } = groupRatioSurrogate(logProb, rowLogRatio.unsqueeze(-1), A, low, high);
    const tokenLoss = inputs.rolloutIsWeights ? raw.mul(inputs.rolloutIsWeights) : raw;
    const loss = aggregateLoss(tokenLoss, mask, "seq-mean-token-mean", opts.normalizer);
    return {
      loss,
      metrics: torch.noGrad(() => ({
        "actor/pg_loss": loss.detach(),
        "actor/pg_clipfrac": maskedMean(clippedWins.to({ dtype: logProb.dtype }), mask),
        "actor/ppo_kl": maskedMean(logRatio.neg(), mask),
        "actor/pg_clipfrac_lower": torch.zerosLike(loss),
        ...ratioStats(w, mask),
      })),
    };
  });
}

/**
 * Sums ρ over each (row, turn) and broadcasts back:
 *   logRatio, turnIds, mask: [B, T]
 * returns turnSum [B, T] (Σ of masked ρ in the token's turn), turnLength [B, T] (masked
 * tokens in that turn) and turnsPerRow [B] (turns with a masked token). Turn id −1 is
 * shifted to slot 0 so the scatter index is valid; the mask, not the id, decides what counts.
 */
function reduceTurns(logRatio: Tensor, turnIds: Tensor, mask: Tensor) {
  return torch.tidy(() => {
    const slot = turnIds.add(1).clampMin(0).to({ dtype: "i64" });
    const width = slot.numel() === 0 ? 1 : slot.max().item() + 1;
    const [rows] = rowsAndTokens(logRatio, "turn log-ratio");
    const zeros = torch.zeros([rows, width], { dtype: logRatio.dtype, device: logRatio.device });
    const sums = zeros.scatterAdd(1, slot, maskedValues(logRatio.detach(), mask));
    const counts = zeros.scatterAdd(1, slot, maskBool(mask).to({ dtype: logRatio.dtype }));
    return { turnSum: sums.gather(1, slot), turnLength: counts.gather(1, slot), turnsPerRow: counts.gt(0).to({ dtype: logRatio.dtype }).sum(-1) };
  });
}

/**
 * VAGEN main's turn-level losses; a turn is one action. Per row b and turn t (masked
 * tokens with turnIds = t, L_t of them), with ρ_j = logπ_j − logπ_old_j:
 *   turn_gspo: log s_t = (1/L_t)·Σ_{j∈t} ρ_j   (geometric-mean ratio, scale_j = 1/L_t)
 *   turn_ppo:  log s_t = Σ_{j∈t} ρ_j           (the turn's full ratio, scale_j = 1)
 * each token's loss ℓ_j as in groupRatioSurrogate (no dual clip), × rolloutIsWeights, then
 *   loss = Σ_b Σ_j mask_j·ℓ_j·scale_j / G
 * ("seq-mean, turn-sum, token-mean"), G = the normalizer's rows (the mini-batch's rows
 * with a masked token; default this batch's, at least 1). One turn per row gives verl's gspo exactly; one token per turn gives
 * vanilla PPO's ratios and clip.
 */
export function turnPolicyLoss(mode: "turn_gspo" | "turn_ppo", inputs: PolicyLossInputs, opts: PolicyLossOptions = {}): PolicyLossResult {
  checkInputs(inputs, mode);
  if (inputs.turnIds === undefined) {
    throw new Error(`${mode}: needs turnIds ([B, T] turn id per token, −1 outside turns); without them a turn cannot be told from a row`);
  }
  const { low, high } = clipBounds(opts);
  const { logProb, oldLogProb, advantages: A, responseMask: mask } = inputs;
  const turnIds = inputs.turnIds;
  return torch.tidy(() => {
    const logRatio = logProb.sub(oldLogProb);
    const { turnSum, turnLength, turnsPerRow } = reduceTurns(logRatio, turnIds, mask);
    const turnLogRatio = mode === "turn_gspo" ? turnSum.div(turnLength.clampMin(1)) : turnSum;
    const { tokenLoss: raw, clippedWins, w } = groupRatioSurrogate(logProb, turnLogRatio, A, low, high);
    let tokenLoss = inputs.rolloutIsWeights ? raw.mul(inputs.rolloutIsWeights) : raw;
    if (mode === "turn_gspo") tokenLoss = tokenLoss.div(turnLength.clampMin(1));
    const rowLoss = maskedValues(tokenLoss, mask).sum(-1); // [B]
    const rows = (opts.normalizer ?? { rows: maskCount(mask, logRatio, -1).gt(0).to({ dtype: "f64" }).sum().item() }).rows;
    const loss = rowLoss.sum().div(Math.max(1, rows));
    return {
      loss,
      metrics: torch.noGrad(() => {
        const meanTurnLogRatio = maskedMean(turnLogRatio, mask);
        return {
          "actor/pg_loss": loss.detach(),
          "actor/pg_clipfrac": maskedMean(clippedWins.to({ dtype: logProb.dtype }), mask),
          "actor/ppo_kl": maskedMean(logRatio.neg(), mask),
          "actor/pg_clipfrac_lower": torch.zerosLike(loss),
          ...ratioStats(w, mask),
          "actor/turns_per_row": turnsPerRow.mean(),
          "actor/turn_len_mean": maskedMean(turnLength, mask),
          // token-weighted spread of log s_t: once it passes log(1 + ε) the clip stops discriminating
          "actor/turn_log_ratio_std": maskedMean(turnLogRatio.sub(meanTurnLogRatio).square(), mask).sqrt(),
        };
      }),
    };
  });
}
