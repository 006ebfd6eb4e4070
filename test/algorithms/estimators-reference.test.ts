/**
 * vagen's estimators in float64 against an independent plain-Python implementation
 * (test/fixtures/algorithms/estimators/make_reference.py, written from the formulas):
 * random batches in concat, split (shuffled, with padding duplicates) and compact
 * layouts, every estimator, to 1e-6.
 */
import { describe, expect, test } from "bun:test";
import * as torch from "../../src/torch/index.ts";
import { computeAdvantages, validateEstimatorSetup, type AdvantageBatch } from "../../src/algorithms/index.ts";
import { expectClose } from "../torch/helpers.ts";
import reference from "../fixtures/algorithms/estimators/reference.json";

interface Case {
  name: string;
  rows: number;
  width: number;
  rewards: number[][];
  mask: number[][];
  values: number[][];
  group_ids: string[];
  state_keys: string[][];
  traj_index?: number[];
  episode_ids?: string[];
  turn_index?: number[];
}
interface Result {
  case: string;
  estimator: string;
  params: Record<string, unknown>;
  advantages: number[][];
  returns: number[][];
  value_mask?: number[][];
  turn_ids?: number[][];
}

const cases = new Map((reference.cases as Case[]).map((c) => [c.name, c]));

function batchOf(c: Case): AdvantageBatch {
  const f64 = { dtype: "f64" as const };
  return {
    tokenLevelRewards: torch.tensor(c.rewards, undefined, f64),
    responseMask: torch.tensor(c.mask, undefined, f64),
    values: torch.tensor(c.values, undefined, f64),
    groupIds: c.group_ids,
    stateKeys: c.state_keys,
    ...(c.traj_index ? { trajIndex: c.traj_index } : {}),
    ...(c.episode_ids ? { episodeIds: c.episode_ids } : {}),
    ...(c.turn_index ? { turnIndex: c.turn_index } : {}),
  };
}

describe("estimators against the Python reference (float64, 1e-6)", () => {
  for (const result of reference.results as Result[]) {
    test(`${result.estimator} ${JSON.stringify(result.params)} on ${result.case}`, () => {
      const c = cases.get(result.case)!;
      const before = torch.liveTensors();
      torch.tidy(() => {
        const resolved = validateEstimatorSetup({
          estimator: result.estimator,
          params: result.params,
          useCritic: true,
          splitsEpisodeAcrossRows: c.traj_index === undefined,
        });
        const out = computeAdvantages(resolved, batchOf(c));
        expect(out.advantages.dtype).toBe("f64");
        expectClose(out.advantages.toFloat64Array(), result.advantages.flat(), 1e-6, 0);
        expectClose(out.returns.toFloat64Array(), result.returns.flat(), 1e-6, 0);
        if (result.value_mask) expectClose(out.valueMask!.toFloat64Array(), result.value_mask.flat(), 0, 0);
        else expect(out.valueMask).toBeUndefined();
        if (result.turn_ids) expectClose(out.turnIds!.toFloat64Array(), result.turn_ids.flat(), 0, 0);
        else expect(out.turnIds).toBeUndefined();
      });
      expect(torch.liveTensors()).toBe(before);
    });
  }
});
