/**
 * FrozenLake moves (gymnasium `FrozenLakeEnv`, spec 3.3): moving off the edge stays put;
 * holes and the goal are absorbing; with `is_slippery` the intended move and each
 * perpendicular one have probability 1/3. VAGEN's optional custom slip (`slip_prob`)
 * replaces the action by a random perpendicular one before that.
 */
import type { Rng } from "../../src/core/rng.ts";
import { FL_ACTIONS, FL_DELTAS, type FrozenLakeAction } from "./map.ts";

/** Perpendicular directions used by VAGEN's custom slip. */
const PERPENDICULAR: Record<FrozenLakeAction, readonly [FrozenLakeAction, FrozenLakeAction]> = {
  left: ["down", "up"],
  down: ["left", "right"],
  right: ["down", "up"],
  up: ["left", "right"],
};

export interface SlipOptions {
  isSlippery: boolean;
  slipProb: number;
}

/** The action after VAGEN's custom slip (`slip_prob`). */
export function applyCustomSlip(action: FrozenLakeAction, slipProb: number, rng: Rng): FrozenLakeAction {
  if (slipProb > 0 && rng.next() < slipProb) return rng.pick(PERPENDICULAR[action]);
  return action;
}

/** The direction actually moved under gymnasium's slippery ice: (a-1)%4, a, (a+1)%4. */
export function gymnasiumSlip(action: FrozenLakeAction, rng: Rng): FrozenLakeAction {
  const a = FL_ACTIONS.indexOf(action);
  const pick = Math.min(2, Math.floor(rng.next() * 3));
  return FL_ACTIONS[(a + 3 + pick) % 4]!;
}

export function isTerminalTile(tile: string): boolean {
  return tile === "H" || tile === "G";
}

/** The cell reached from (row, col) by moving in `direction`; edges clamp. */
export function moveFrom(desc: readonly string[], row: number, col: number, direction: FrozenLakeAction): [number, number] {
  if (isTerminalTile(desc[row]![col]!)) return [row, col];
  const [dr, dc] = FL_DELTAS[direction];
  const rows = desc.length;
  const cols = desc[0]!.length;
  return [Math.min(rows - 1, Math.max(0, row + dr)), Math.min(cols - 1, Math.max(0, col + dc))];
}
