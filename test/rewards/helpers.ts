/** Shared pieces of the reward tests: a Sokoban-like state and a config builder. */
import * as v from "valibot";
import { gridObject, type GridState, type Position } from "../../envs/_common/state.ts";
import { StateRewardConfig, type StateRewardConfigInput } from "../../src/rewards/config.ts";

export function gridState(player: Position, objects: [string, Position][]): GridState {
  return { grid_size: [6, 6], player, objects: objects.map(([id, at]) => gridObject(id, player, at)) };
}

export function config(input: StateRewardConfigInput = {}): StateRewardConfig {
  return v.parse(StateRewardConfig, input);
}

/** Both sections on at 1.0 each, read by the exact parser. */
export const EXACT_BOTH: StateRewardConfigInput = {
  state_estimation: { enable: true, reward: 1 },
  transition_prediction: { enable: true, reward: 1 },
  scorer: "exact",
};

export function wm(perception: string, prediction: string, answer = "Down"): string {
  return `<perception>${perception}</perception><reasoning>push it</reasoning><prediction>${prediction}</prediction><answer>${answer}</answer>`;
}
