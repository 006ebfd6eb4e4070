/**
 * `gigpo`: Group-in-Group Policy Optimization (Feng et al. 2025, "Group-in-Group Policy
 * Optimization for LLM Agent Training"), critic-free credit per turn. Normalisation
 * details follow the authors' verl-agent code (`gigpo/core_gigpo.py`).
 *
 * Episode level (the paper's Eq. 3), over trajectories of one group uid:
 *   G_n   = sum of trajectory n's rewards at model tokens
 *   A_E_n = (G_n - mean) / (std + 1e-6)  with normalizeByStd ("mean_std_norm"), else G_n - mean
 *           (unbiased std; a one-trajectory group uses mean 0 and std 1)
 * Step level (Eqs. 5-7): every turn is a step; steps of one group uid whose env state keys
 * are identical form an anchor-state group.
 *   r_t   = sum of turn t's rewards;  R_t = r_t + gamma R_{t+1}  (discounted return over turns)
 *   A_S_t = (R_t - mean) / (std + 1e-6) or R_t - mean over the step's anchor group
 *           (unbiased std; a one-step group gives 0)
 * Combined (Eq. 8): A = A_E + omega A_S on every model token of the turn; returns = A.
 * No critic, no whitening; turn ids are published.
 *
 * `stateKeys[b]` lists the state key of each turn row b holds, in order; the count must
 * match the turns the mask shows for the row.
 *
 * Shapes: batch tensors [B, T]; outputs [B, T]; internally [N] episodes and [N, K] turns.
 */
import * as torch from "../../torch/index.ts";
import type { AdvantageBatch, AdvantageOutput } from "./types.ts";
import { backwardGae } from "./gae-recursion.ts";
import { groupBy, groupStats } from "./groups.ts";
import { packBatch } from "./packed.ts";
import { indexTensor, spreadTurns, sumPerTurn, turnIdTensor, unpackTokens, type TrajectoryLayout } from "../trajectory.ts";

export interface GigpoOptions {
  /** Discount of the step returns over turns (algorithm.gamma). */
  gamma: number;
  /** omega: weight of the step-level advantage (algorithm.step_advantage_w, 1.0). */
  stepAdvantageWeight: number;
  /** Divide by the group std ("mean_std_norm") or only centre ("mean_norm", the default) (algorithm.gigpo_mode). */
  normalizeByStd: boolean;
}

export const GIGPO_EPSILON = 1e-6;

export function gigpo(batch: AdvantageBatch, { gamma, stepAdvantageWeight, normalizeByStd }: GigpoOptions): AdvantageOutput {
  // Only the outputs leave: every intermediate tensor is freed here.
  return torch.tidy(() => {
    const packed = packBatch(batch);
    const { layout } = packed;
    const like = { dtype: packed.rewards.dtype, device: packed.rewards.device };

    // Episode level: one member per trajectory.
    const episodeScores = packed.rewards.sum(1); // [N]
    const episodeGroups = groupBy(layout.trajectories.map((t) => t.group));
    const episode = groupStats(episodeScores, episodeGroups, { unbiased: true });
    const episodeMean = episode.mean.mul(episode.shared); // singletons: mean 0
    const episodeStd = episode.std.mul(episode.shared).add(episode.shared.rsub(1)); // singletons: std 1
    let episodeAdvantage = episodeScores.sub(episodeMean);
    if (normalizeByStd) episodeAdvantage = episodeAdvantage.div(episodeStd.add(GIGPO_EPSILON));

    // Step level: one member per existing turn slot n * K + t.
    const turnReturns = backwardGae(sumPerTurn(layout, packed.rewards), torch.zeros([layout.trajectories.length, layout.maxTurns], like), gamma, 1);
    const { slots, keys } = anchorGroups(layout, batch.stateKeys);
    const slotIndex = indexTensor(slots, like.device);
    const stepReturns = turnReturns.reshape(-1).indexSelect(0, slotIndex); // [S]
    const step = groupStats(stepReturns, groupBy(keys), { unbiased: true });
    const stepStd = step.std.mul(step.shared).add(step.shared.rsub(1)); // singletons: std 1 (and R - mean = 0)
    let stepAdvantage = stepReturns.sub(step.mean);
    if (normalizeByStd) stepAdvantage = stepAdvantage.div(stepStd.add(GIGPO_EPSILON));
    const perTurn = torch.zeros([layout.trajectories.length * layout.maxTurns], like).indexCopy(0, slotIndex, stepAdvantage);

    const combined = packed.valid
      .mul(episodeAdvantage.unsqueeze(1))
      .add(spreadTurns(layout, perTurn.view(layout.trajectories.length, layout.maxTurns)).mul(stepAdvantageWeight));
    const advantages = unpackTokens(layout, combined);
    return { advantages, returns: advantages, turnIds: turnIdTensor(layout, like.device) };
  });
}

/** The existing turn slots and their anchor-group keys (group uid + state key). */
function anchorGroups(layout: TrajectoryLayout, stateKeys: AdvantageBatch["stateKeys"]): { slots: number[]; keys: string[] } {
  if (!stateKeys) throw new Error("gigpo: stateKeys is missing; expected, per row, the env state key of each turn the row holds");
  const turnsInRow = new Map<number, number>();
  for (const row of layout.turnRow) if (row >= 0) turnsInRow.set(row, (turnsInRow.get(row) ?? 0) + 1);
  for (let b = 0; b < layout.rows; b++) {
    if (layout.sourceRow[b] !== b) continue;
    const expected = turnsInRow.get(b) ?? 0;
    const got = stateKeys[b]?.length ?? 0;
    if (got !== expected) throw new Error(`gigpo: stateKeys[${b}] has ${got} keys; expected ${expected}, one per turn the response mask shows for row ${b}`);
  }
  const slots: number[] = [];
  const keys: string[] = [];
  layout.turnRow.forEach((row, slot) => {
    if (row < 0) return;
    const trajectory = layout.trajectories[Math.floor(slot / layout.maxTurns)]!;
    slots.push(slot);
    keys.push(`${trajectory.group}\u0000${stateKeys[row]![layout.turnInRow[slot]!]}`);
  });
  return { slots, keys };
}
