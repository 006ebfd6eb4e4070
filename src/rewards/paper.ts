/**
 * The paper's scoring variants (legacy VAGEN, spec 6.2-6.4), kept as options:
 *
 * - FrozenLake (v2): weighted bipartite F1. The similarity, the optimal matching and the
 *   per-type F1 are main's (`f1.ts`), so it is `groupedF1` with weights target 0.7 /
 *   hole 0.3 and no chance floor.
 * - Sokoban (v3): per type, a greedy one-to-one matching in which a pair counts only if
 *   both relations are equal; P = matches / |pred|, R = matches / |gold|; score =
 *   0.5·F1_target + 0.5·F1_box. A repetition penalty replaces the score by -0.1 when the
 *   section's text is among the k most repeated texts so far and F1_target + F1_box < 0.7
 *   (the paper: "F1 < 0.7 and repetitive").
 * - YES/NO (v1): the judge answers `<answer>YES</answer>` or `<answer>NO</answer>`;
 *   YES scores 1, NO or anything unparseable 0 (`parseYesNo` in judge.ts).
 */
import type { StateRelation } from "../../envs/_common/types.ts";
import { byObject, f1 } from "./f1.ts";

function exactMatches(predicted: readonly StateRelation[], gold: readonly StateRelation[]): number {
  const used = new Array<boolean>(gold.length).fill(false);
  let matches = 0;
  for (const p of predicted) {
    const j = gold.findIndex(
      (g, i) => !used[i] && g.vertical_relation === p.vertical_relation && g.horizontal_relation === p.horizontal_relation,
    );
    if (j >= 0) {
      used[j] = true;
      matches++;
    }
  }
  return matches;
}

/** F1 of one object type under the paper's exact greedy matching. */
export function exactMatchF1(predicted: readonly StateRelation[], gold: readonly StateRelation[]): number {
  if (predicted.length === 0 && gold.length === 0) return 1;
  if (predicted.length === 0 || gold.length === 0) return 0;
  const matches = exactMatches(predicted, gold);
  return f1(matches / predicted.length, matches / gold.length);
}

/** Sokoban's v3 parts: F1 per type and their 0.5 / 0.5 mix. */
export function sokobanPaperF1(predicted: readonly StateRelation[], gold: readonly StateRelation[]): { target: number; box: number; score: number } {
  const target = exactMatchF1(byObject(predicted, "target"), byObject(gold, "target"));
  const box = exactMatchF1(byObject(predicted, "box"), byObject(gold, "box"));
  return { target, box, score: 0.5 * target + 0.5 * box };
}

/**
 * Counts every string it is shown, keeping at most `capacity` distinct strings (the
 * least counted, oldest first, make room), and says whether a string is among the `k`
 * most counted. The paper's `TopKStringTracker` with m = 1000 and k = 5.
 */
export class TopKStringTracker {
  private readonly counts = new Map<string, number>();

  constructor(
    private readonly capacity = 1000,
    private readonly k = 5,
  ) {}

  add(text: string): void {
    const count = this.counts.get(text);
    if (count !== undefined) {
      this.counts.set(text, count + 1);
      return;
    }
    if (this.counts.size >= this.capacity) this.evictLeastCounted();
    this.counts.set(text, 1);
  }

  isTopK(text: string): boolean {
    if (!this.counts.has(text)) return false;
    // Ranked as Python's Counter.most_common ranks: by count, ties by first appearance
    // (a Map iterates in insertion order, and the sort is stable), so a string seen once
    // does not outrank older strings seen as often.
    const ranked = [...this.counts].sort((a, b) => b[1] - a[1]);
    return ranked.slice(0, this.k).some(([other]) => other === text);
  }

  private evictLeastCounted(): void {
    let victim: string | undefined;
    let least = Infinity;
    for (const [text, count] of this.counts) {
      if (count < least) {
        least = count;
        victim = text;
      }
    }
    if (victim !== undefined) this.counts.delete(victim);
  }
}

export interface RepetitionPenalty {
  /** Combined F1 (target + box) under which a repeated text is penalised. */
  threshold: number;
  penalty: number;
}

/** Sokoban's v3 score with the repetition penalty; records `text` in the tracker first. */
export function sokobanPaperScore(
  predicted: readonly StateRelation[],
  gold: readonly StateRelation[],
  text: string,
  tracker: TopKStringTracker,
  rule: RepetitionPenalty = { threshold: 0.7, penalty: -0.1 },
): number {
  const parts = sokobanPaperF1(predicted, gold);
  tracker.add(text);
  if (tracker.isTopK(text) && parts.target + parts.box < rule.threshold) return rule.penalty;
  return parts.score;
}
