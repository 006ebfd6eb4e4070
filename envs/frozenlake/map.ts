/**
 * FrozenLake maps (spec 3.2): random boards of frozen (F) and hole (H) cells with a random
 * start (S) and goal (G), regenerated until a 4-neighbour path joins them. Also the BFS
 * solver. Maps are rows of the letters S, F, H, G, as in gymnasium's `desc`.
 */
import { finishNow, type Work } from "../_common/cooperative.ts";
import { Rng } from "../../src/core/rng.ts";

export const FL_ACTIONS = ["left", "down", "right", "up"] as const;
export type FrozenLakeAction = (typeof FL_ACTIONS)[number];

/** Row/column delta per action (gymnasium actions 0-3: left, down, right, up). */
export const FL_DELTAS: Record<FrozenLakeAction, readonly [number, number]> = {
  left: [0, -1],
  down: [1, 0],
  right: [0, 1],
  up: [-1, 0],
};

/** No valid map within `maxAttempts` boards. */
export class MapGenerationError extends Error {
  constructor(readonly attempts: number) {
    super(`no map with a path from start to goal in ${attempts} boards`);
    this.name = "MapGenerationError";
  }
}

/**
 * VAGEN's `generate_random_map`: each cell frozen with probability `p`; start and goal
 * drawn uniformly; a draw where they coincide, or a board with no path between them,
 * restarts with a fresh board. At most `maxAttempts` boards are drawn (VAGEN has no
 * limit; with tiny `p` on a big board a path mostly needs start and goal to be
 * neighbours, about one board in a thousand at 64x64).
 */
export function generateRandomMap(size: number, p: number, seed: number, maxAttempts = Infinity): string[] {
  return finishNow(randomMapWork(size, p, seed, maxAttempts));
}

/** `generateRandomMap` as work that yields after each board. */
export function* randomMapWork(size: number, p: number, seed: number, maxAttempts = Infinity): Work<string[]> {
  const rng = new Rng(seed);
  for (let attempt = 1; attempt <= maxAttempts; attempt++) {
    const board: string[][] = [];
    for (let r = 0; r < size; r++) {
      const row: string[] = [];
      for (let c = 0; c < size; c++) row.push(rng.next() < p ? "F" : "H");
      board.push(row);
    }
    const start = [rng.int(size), rng.int(size)] as const;
    const goal = [rng.int(size), rng.int(size)] as const;
    if (start[0] !== goal[0] || start[1] !== goal[1]) {
      board[start[0]]![start[1]] = "S";
      board[goal[0]]![goal[1]] = "G";
      const desc = board.map((row) => row.join(""));
      if (isValidMap(desc)) return desc;
    }
    yield;
  }
  throw new MapGenerationError(maxAttempts);
}

/** True when a 4-neighbour path over non-hole cells joins S and G. */
export function isValidMap(desc: readonly string[]): boolean {
  return shortestPath(desc) !== null;
}

export function findCell(desc: readonly string[], letter: string): [number, number] | null {
  for (let r = 0; r < desc.length; r++) {
    const c = desc[r]!.indexOf(letter);
    if (c >= 0) return [r, c];
  }
  return null;
}

/**
 * Shortest non-slippery action sequence from `from` (default: the S cell) to the goal,
 * avoiding holes; `null` when the goal is unreachable.
 */
export function shortestPath(desc: readonly string[], from?: readonly [number, number]): FrozenLakeAction[] | null {
  const start = from ?? findCell(desc, "S");
  const goal = findCell(desc, "G");
  if (!start || !goal) return null;
  const rows = desc.length;
  const cols = desc[0]!.length;
  const parent = new Map<number, { prev: number; action: FrozenLakeAction }>();
  const startKey = start[0] * cols + start[1];
  const seen = new Set<number>([startKey]);
  const queue: number[] = [startKey];
  const goalKey = goal[0] * cols + goal[1];
  for (let head = 0; head < queue.length; head++) {
    const key = queue[head]!;
    if (key === goalKey) {
      const path: FrozenLakeAction[] = [];
      for (let k = key; k !== startKey; ) {
        const step = parent.get(k)!;
        path.push(step.action);
        k = step.prev;
      }
      return path.reverse();
    }
    const r = Math.floor(key / cols);
    const c = key % cols;
    for (const action of FL_ACTIONS) {
      const [dr, dc] = FL_DELTAS[action];
      const nr = r + dr;
      const nc = c + dc;
      if (nr < 0 || nc < 0 || nr >= rows || nc >= cols || desc[nr]![nc] === "H") continue;
      const next = nr * cols + nc;
      if (seen.has(next)) continue;
      seen.add(next);
      parent.set(next, { prev: key, action });
      queue.push(next);
    }
  }
  return null;
}
