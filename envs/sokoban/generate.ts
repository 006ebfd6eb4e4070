/**
 * Sokoban room generation by reverse play (gym-sokoban's `generate_room`, spec 2.3) and
 * VAGEN's solution-length filter with deterministic re-seeding (spec 2.3 step 4).
 *
 * The random draws follow gym-sokoban's order (direction, start, then per step: maybe a
 * new direction, a mask; then the player cell and each target), but come from our own
 * seeded generator, so levels match VAGEN's distribution, not its exact maps.
 */
import { Rng, nextRetrySeed } from "../_common/rng.ts";
import { CELL, type SokobanRoom } from "./room.ts";
import { shortestSolution } from "./solver.ts";

/** The five 3x3 floor masks stamped along the random walk. */
const MASKS: readonly (readonly number[])[] = [
  [0, 0, 0, 1, 1, 1, 0, 0, 0], // horizontal bar
  [0, 1, 0, 0, 1, 0, 0, 1, 0], // vertical bar
  [0, 0, 0, 1, 1, 0, 0, 1, 0], // corner
  [0, 0, 0, 1, 1, 0, 1, 1, 0], // 2x2 block
  [0, 0, 0, 0, 1, 1, 0, 1, 0], // corner
];

const WALK_DIRECTIONS: readonly (readonly [number, number])[] = [
  [1, 0],
  [0, 1],
  [-1, 0],
  [0, -1],
];

/** Reverse-play search limits, hard-coded in gym-sokoban. */
const REVERSE_PLAY_TTL = 300;
const REVERSE_PLAY_MAX_STATES = 300_000;
const TOPOLOGY_TRIES = 4;
const P_CHANGE_DIRECTION = 0.35;

export class RoomGenerationError extends Error {}

export interface RoomOptions {
  height: number;
  width: number;
  numBoxes: number;
  /** Random-walk length; gym-sokoban uses `int(1.7 * (H + W))`. */
  numSteps?: number;
}

export function defaultWalkSteps(height: number, width: number): number {
  return Math.floor(1.7 * (height + width));
}

/** Floor topology by a random walk stamping 3x3 masks; the border is always wall. */
export function generateTopology(rng: Rng, height: number, width: number, numSteps: number): Uint8Array {
  const level = new Uint8Array(height * width);
  let direction = rng.pick(WALK_DIRECTIONS);
  let row = rng.intInclusive(1, height - 1);
  let col = rng.intInclusive(1, width - 1);
  for (let step = 0; step < numSteps; step++) {
    if (rng.chance(P_CHANGE_DIRECTION)) direction = rng.pick(WALK_DIRECTIONS);
    row = Math.max(Math.min(row + direction[0], height - 2), 1);
    col = Math.max(Math.min(col + direction[1], width - 2), 1);
    const mask = rng.pick(MASKS);
    for (let mr = 0; mr < 3; mr++) {
      for (let mc = 0; mc < 3; mc++) {
        if (mask[mr * 3 + mc]) level[(row - 1 + mr) * width + (col - 1 + mc)] = CELL.floor;
      }
    }
  }
  for (let r = 0; r < height; r++) {
    level[r * width] = CELL.wall;
    level[r * width + width - 1] = CELL.wall;
  }
  for (let c = 0; c < width; c++) {
    level[c] = CELL.wall;
    level[(height - 1) * width + c] = CELL.wall;
  }
  return level;
}

/** Puts the player and `numBoxes` targets on random floor cells (in place). */
export function placePlayerAndTargets(rng: Rng, room: Uint8Array, numBoxes: number): void {
  const floorCells = (): number[] => {
    const cells: number[] = [];
    for (let i = 0; i < room.length; i++) if (room[i] === CELL.floor) cells.push(i);
    return cells;
  };
  const free = floorCells();
  if (free.length <= numBoxes + 1) {
    throw new RoomGenerationError(`Not enough free spots (#${free.length}) to place 1 player and ${numBoxes} boxes.`);
  }
  room[free[rng.int(free.length)]!] = CELL.player;
  for (let n = 0; n < numBoxes; n++) {
    const cells = floorCells();
    room[cells[rng.int(cells.length)]!] = CELL.target;
  }
}

interface ReverseSearch {
  width: number;
  fixed: Uint8Array;
  numBoxes: number;
  explored: Set<string>;
  bestState: Uint8Array;
  bestScore: number;
}

const PULL_DELTAS: readonly (readonly [number, number])[] = [
  [-1, 0],
  [1, 0],
  [0, -1],
  [0, 1],
];

/**
 * Depth-first reverse play from the solved room: the player walks (actions 4-7) or walks
 * and pulls the box behind it (actions 0-3). The best state maximises
 * `box_swaps * sum(Manhattan(box, its target))` with every target uncovered.
 */
function reversePlay(state: Uint8Array, fixed: Uint8Array, width: number, numBoxes: number): { state: Uint8Array; score: number } {
  const boxOrigins: number[] = [];
  for (let i = 0; i < fixed.length; i++) if (fixed[i] === CELL.target) boxOrigins.push(i);
  const search: ReverseSearch = { width, fixed, numBoxes: boxOrigins.length, explored: new Set(), bestState: state, bestScore: -1 };
  void numBoxes;
  depthFirst(search, state, boxOrigins.slice(), boxOrigins, 0, -1, REVERSE_PLAY_TTL);
  return { state: search.bestState, score: search.bestScore };
}

function depthFirst(
  search: ReverseSearch,
  state: Uint8Array,
  boxAt: number[],
  origins: readonly number[],
  boxSwaps: number,
  lastPull: number,
  ttl: number,
): void {
  ttl -= 1;
  if (ttl <= 0 || search.explored.size >= REVERSE_PLAY_MAX_STATES) return;
  const key = stateKey(state);
  if (search.explored.has(key)) return;
  search.explored.add(key);

  let score = boxSwaps * displacement(boxAt, origins, search.width);
  let emptyTargets = 0;
  for (let i = 0; i < state.length; i++) if (state[i] === CELL.target) emptyTargets++;
  if (emptyTargets !== search.numBoxes) score = 0;
  if (score > search.bestScore) {
    search.bestState = state;
    search.bestScore = score;
  }

  const player = state.indexOf(CELL.player);
  for (let action = 0; action < 8; action++) {
    const next = state.slice();
    const nextBoxAt = boxAt.slice();
    const lastPullNext = reverseMove(next, search.fixed, search.width, nextBoxAt, lastPull, player, action);
    const swaps = lastPullNext !== lastPull ? boxSwaps + 1 : boxSwaps;
    // gym-sokoban passes the parent's `last_pull` down, not the updated one; kept as is
    // because it shapes which rooms score highest.
    depthFirst(search, next, nextBoxAt, origins, swaps, lastPull, ttl);
  }
}

/**
 * A short exact key for a reverse-play state. The walls, floor and targets never change
 * during the search, so the state is the player cell plus each box cell with its value
 * (3 once pulled, 4 before), which is what gym-sokoban's whole-grid key distinguishes.
 */
function stateKey(state: Uint8Array): string {
  let key = "";
  for (let i = 0; i < state.length; i++) {
    const cell = state[i]!;
    if (cell === CELL.player) key += String.fromCharCode(0xffff - i);
    else if (cell === CELL.boxOnTarget || cell === CELL.box) key += String.fromCharCode(i * 2 + (cell === CELL.boxOnTarget ? 1 : 0));
  }
  return key;
}

/** Returns the new `last_pull` (the index of the pulled box's origin target). */
function reverseMove(
  state: Uint8Array,
  fixed: Uint8Array,
  width: number,
  boxAt: number[],
  lastPull: number,
  player: number,
  action: number,
): number {
  const [dr, dc] = PULL_DELTAS[action % 4]!;
  const next = player + dr * width + dc;
  const nextCell = state[next];
  if (nextCell !== CELL.floor && nextCell !== CELL.target) return lastPull;
  state[player] = fixed[player]!;
  state[next] = CELL.player;
  if (action < 4) {
    const behind = player - dr * width - dc;
    const behindCell = state[behind];
    if (behindCell === CELL.box || behindCell === CELL.boxOnTarget) {
      state[player] = CELL.boxOnTarget; // a pulled box; every box becomes "off target" at the end
      state[behind] = fixed[behind]!;
      for (let k = 0; k < boxAt.length; k++) {
        if (boxAt[k] === behind) {
          boxAt[k] = player;
          lastPull = k;
        }
      }
    }
  }
  return lastPull;
}

function displacement(boxAt: readonly number[], origins: readonly number[], width: number): number {
  let total = 0;
  for (let k = 0; k < boxAt.length; k++) {
    const a = boxAt[k]!;
    const b = origins[k]!;
    total += Math.abs(Math.floor(a / width) - Math.floor(b / width)) + Math.abs((a % width) - (b % width));
  }
  return total;
}

/** One room from `rng`: up to 4 topologies, each searched by reverse play. */
export function generateRoom(rng: Rng, options: RoomOptions): SokobanRoom {
  const { height, width, numBoxes } = options;
  const numSteps = options.numSteps ?? defaultWalkSteps(height, width);
  let fixed = new Uint8Array(height * width);
  let state = fixed;
  let score = 0;
  for (let attempt = 0; attempt < TOPOLOGY_TRIES; attempt++) {
    const room = generateTopology(rng, height, width, numSteps);
    placePlayerAndTargets(rng, room, numBoxes);
    fixed = room.map((cell) => (cell === CELL.player ? CELL.floor : cell));
    // Solved start: every box stands on its target.
    const solved = room.map((cell) => (cell === CELL.target ? CELL.box : cell));
    const result = reversePlay(solved, fixed, width, numBoxes);
    state = result.state.map((cell) => (cell === CELL.boxOnTarget ? CELL.box : cell));
    score = result.score;
    if (score > 0) break;
  }
  if (score <= 0) throw new RoomGenerationError("Generated Model with score == 0");
  return { height, width, fixed, state, numBoxes };
}

export interface LevelOptions extends RoomOptions {
  /** Accept only rooms whose BFS-optimal solution length is in [min, max]; null accepts any. */
  solutionRange: readonly [number, number] | null;
  maxTries: number;
  bfsMaxDepth: number;
}

export interface Level {
  room: SokobanRoom;
  /** The seed that produced the accepted room (after re-seeds). */
  seedUsed: number;
  /** BFS-optimal solution, when it was computed (only with a solution range). */
  solution: string[] | null;
  /** False when no room passed the filter within `maxTries` and the last one is used. */
  accepted: boolean;
  tries: number;
}

/**
 * VAGEN's `PatchedSokobanEnv.reset`: generate from `seed`; if generation fails or the
 * optimal solution length is outside the range, re-seed with a stable hash of the seed's
 * decimal string and try again.
 */
export function generateLevel(seed: number, options: LevelOptions): Level {
  let current = seed;
  let last: { room: SokobanRoom; seed: number; solution: string[] | null } | null = null;
  for (let attempt = 1; attempt <= options.maxTries; attempt++) {
    try {
      const room = generateRoom(new Rng(current), options);
      if (options.solutionRange === null) return { room, seedUsed: current, solution: null, accepted: true, tries: attempt };
      const solution = shortestSolution(room, options.bfsMaxDepth);
      const length = solution?.length ?? 0;
      last = { room, seed: current, solution };
      const [min, max] = options.solutionRange;
      if (length >= min && length <= max) return { room, seedUsed: current, solution, accepted: true, tries: attempt };
    } catch (err) {
      if (!(err instanceof RoomGenerationError)) throw err;
    }
    current = nextRetrySeed(current);
  }
  if (!last) {
    throw new RoomGenerationError(
      `no Sokoban room of ${options.height}x${options.width} with ${options.numBoxes} box(es) could be generated in ${options.maxTries} tries`,
    );
  }
  return { room: last.room, seedUsed: last.seed, solution: last.solution, accepted: false, tries: options.maxTries };
}
