/**
 * The `info` a grid env returns from `step()`, in VAGEN's shape: the parser's outputs,
 * per-turn metrics (`action_is_valid`, `action_is_effective`, `format_correct`), the
 * trajectory's success, the ground-truth state for world-model rewards, and the actions
 * that were executed.
 */
import type { ParsedResponse } from "./parsers.ts";
import type { GridState } from "./state.ts";
import type { EnvInfo } from "./types.ts";

export interface TurnOutcome {
  /** Well-formed, at least one action, and every action known. */
  actionIsValid: boolean;
  /** The player moved. */
  actionIsEffective: boolean;
  success: boolean;
}

export function stepInfo(parsed: ParsedResponse, turn: TurnOutcome, state: GridState, validActions: readonly string[]): EnvInfo {
  return {
    ...parsed,
    metrics: {
      turn_metrics: {
        action_is_valid: turn.actionIsValid,
        action_is_effective: turn.actionIsEffective,
        format_correct: parsed.format_correct,
      },
      traj_metrics: { success: turn.success },
    },
    success: turn.success,
    state,
    valid_actions: [...validActions],
  };
}
