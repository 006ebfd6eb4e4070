/** Hand-made training rows for trainer tests (no rollout needed). */
import type { TrainingRow } from "../../src/rollout/types.ts";

export function handRow(opts: { uid: string; traj?: number; prompt: number[]; response: number[]; mask?: number[]; reward?: number; success?: boolean }): TrainingRow {
  const R = opts.response.length;
  const mask = opts.mask ?? new Array<number>(R).fill(1);
  const rewards = new Array<number>(R).fill(0);
  const last = mask.lastIndexOf(1);
  if (last >= 0) rewards[last] = opts.reward ?? 0;
  return {
    uid: opts.uid,
    episodeId: `${opts.uid}-${opts.traj ?? 0}`,
    trajIndex: opts.traj ?? 0,
    turnIndex: 0,
    env: "hand",
    seed: 0,
    promptIds: opts.prompt,
    responseIds: opts.response,
    responseMask: mask,
    rolloutLogprobs: new Array<number>(R).fill(0),
    logprobsComplete: false,
    tokenRewards: rewards,
    responseSpans: [{ start: 0, end: R }],
    images: [],
    episodeReward: opts.reward ?? 0,
    success: opts.success ?? false,
    episodeTurns: 1,
    lastTurn: true,
    endsWithSummary: false,
    truncation: "none",
    rewardParts: {},
  };
}
