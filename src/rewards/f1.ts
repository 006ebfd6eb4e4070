/**
 * VAGEN main's grouped F1 (`spatial.py`) and its chance-floor rescale (`state.py`).
 *
 * An item says where one object is relative to the player: `{object_id,
 * vertical_relation, horizontal_relation}`, a relation null when not stated.
 *
 * - Item similarity: the axes on which the prediction is non-null and equals the gold,
 *   over 2 (so 0, 0.5 or 1).
 * - Per object type: the optimal one-to-one matching of predicted to gold items gives the
 *   matched similarity M; P = M / |pred|, R = M / |gold|, F1 = 2PR / (P + R). Both lists
 *   empty gives 1, exactly one empty gives 0.
 * - Grouped: Σ w·F1 / Σ w over the types in the weights that appear in either list; 1
 *   when no weighted type appears at all. Types outside the weights are not scored.
 */
import type { StateRelation } from "../../envs/_common/types.ts";
import { maxWeightAssignment } from "./assignment.ts";

export function itemSimilarity(predicted: StateRelation, gold: StateRelation): number {
  let agree = 0;
  if (predicted.vertical_relation !== null && predicted.vertical_relation === gold.vertical_relation) agree++;
  if (predicted.horizontal_relation !== null && predicted.horizontal_relation === gold.horizontal_relation) agree++;
  return agree / 2;
}

/** F1 of two lists of one object type under optimal one-to-one matching. */
export function matchedF1(predicted: readonly StateRelation[], gold: readonly StateRelation[]): number {
  if (predicted.length === 0 && gold.length === 0) return 1;
  if (predicted.length === 0 || gold.length === 0) return 0;
  const similarity = predicted.map((p) => gold.map((g) => itemSimilarity(p, g)));
  const matched = maxWeightAssignment(similarity).total;
  return f1(matched / predicted.length, matched / gold.length);
}

export function f1(precision: number, recall: number): number {
  return precision + recall > 0 ? (2 * precision * recall) / (precision + recall) : 0;
}

export function byObject(items: readonly StateRelation[], objectId: string): StateRelation[] {
  return items.filter((item) => item.object_id === objectId);
}

export function groupedF1(
  predicted: readonly StateRelation[],
  gold: readonly StateRelation[],
  weights: Readonly<Record<string, number>>,
): number {
  let weighted = 0;
  let totalWeight = 0;
  for (const [objectId, weight] of Object.entries(weights)) {
    const p = byObject(predicted, objectId);
    const g = byObject(gold, objectId);
    if (p.length === 0 && g.length === 0) continue;
    weighted += weight * matchedF1(p, g);
    totalWeight += weight;
  }
  return totalWeight > 0 ? weighted / totalWeight : 1;
}

/**
 * Rescales a score so that chance level (`base`) and below pay 0 and a perfect score
 * pays 1: max(0, (f - base) / (1 - base)); a base <= 0 leaves the score as it is.
 */
export function rescaleAboveChance(score: number, base: number): number {
  if (base <= 0) return score;
  return Math.max(0, (score - base) / (1 - base));
}
