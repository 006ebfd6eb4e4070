/**
 * One primitive Sokoban move with gym-sokoban's push semantics (spec 2.5).
 *
 * Only pushing exists: walking into a box pushes it if the cell beyond is floor or an
 * empty target; otherwise the player tries a plain move onto floor or target. The gym
 * reward is computed too (VAGEN main ignores it; the paper's preset sums it).
 */
import { CELL, DELTAS, type SokobanAction, type SokobanRoom } from "./room.ts";

export interface GymRewardConfig {
  stepPenalty: number;
  boxOnTargetReward: number;
  boxOffTargetPenalty: number;
  finishReward: number;
}

export const GYM_SOKOBAN_REWARDS: GymRewardConfig = {
  stepPenalty: -0.1,
  boxOnTargetReward: 1,
  boxOffTargetPenalty: -1,
  finishReward: 10,
};

export interface MoveResult {
  moved: boolean;
  pushedBox: boolean;
  boxesOnTarget: number;
  /** gym-sokoban's reward for this move. */
  gymReward: number;
}

export function countBoxesOnTarget(room: SokobanRoom): number {
  let n = 0;
  for (let i = 0; i < room.state.length; i++) if (room.state[i] === CELL.boxOnTarget) n++;
  return n;
}

export function allBoxesOnTarget(room: SokobanRoom): boolean {
  for (let i = 0; i < room.state.length; i++) if (room.state[i] === CELL.box) return false;
  return true;
}

/**
 * Applies `action` in place. `player` is the player's cell index (kept by the caller so a
 * step needs no grid scan); the new index is `player + delta` when `moved`.
 */
export function applyMove(
  room: SokobanRoom,
  player: number,
  action: SokobanAction,
  rewards: GymRewardConfig = GYM_SOKOBAN_REWARDS,
): MoveResult {
  const { width, height, state, fixed } = room;
  const before = countBoxesOnTarget(room);
  const [dr, dc] = DELTAS[action];
  const r = Math.floor(player / width);
  const c = player - r * width;
  const nr = r + dr;
  const nc = c + dc;
  const br = nr + dr;
  const bc = nc + dc;
  let moved = false;
  let pushedBox = false;

  const inside = (rr: number, cc: number) => rr >= 0 && cc >= 0 && rr < height && cc < width;
  if (inside(nr, nc)) {
    const next = nr * width + nc;
    const nextCell = state[next]!;
    const beyond = inside(br, bc) ? br * width + bc : -1;
    if ((nextCell === CELL.box || nextCell === CELL.boxOnTarget) && beyond >= 0 && (state[beyond] === CELL.floor || state[beyond] === CELL.target)) {
      state[beyond] = fixed[beyond] === CELL.target ? CELL.boxOnTarget : CELL.box;
      state[next] = CELL.player;
      state[player] = fixed[player]!;
      moved = true;
      pushedBox = true;
    } else if (nextCell === CELL.floor || nextCell === CELL.target) {
      state[next] = CELL.player;
      state[player] = fixed[player]!;
      moved = true;
    }
  }

  const after = pushedBox ? countBoxesOnTarget(room) : before;
  let gymReward = rewards.stepPenalty;
  if (after > before) gymReward += rewards.boxOnTargetReward;
  else if (after < before) gymReward += rewards.boxOffTargetPenalty;
  if (after === room.numBoxes) gymReward += rewards.finishReward;
  return { moved, pushedBox, boxesOnTarget: after, gymReward };
}
