/**
 * Sokoban room generation by reverse play (gym-sokoban's `generate_room`, spec 2.3) and
 * VAGEN's solution-length filter with deterministic re-seeding (spec 2.3 step 4).
 *
 * The random draws follow gym-sokoban's order (direction, start, then per step: maybe a
 * new direction, a mask; then the player cell and each target), but come from our own
 * seeded generator, so levels match VAGEN's distribution, not its exact maps.
 */
import { finishNow, type Work } from "../_common/cooperative.ts";
import { Rng, nextRetrySeed } from "../../src/core/rng.ts";
import { CELL, type SokobanRoom } from "./room.ts";
import { solutionWork } from "./solver.ts";

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

const PULL_DELTAS: readonly (readonly [number, number])[] = [
  [-1, 0],
  [1, 0],
  [0, -1],
  [0, 1],
];

/** Reverse-play states searched between two yields. */
const STATES_PER_YIELD = 512;

/** What one reverse move changed, so that backtracking can put it back. */
interface ReverseMove {
  from: number;
  to: number;
  toCell: number;
  /** The pulled box's cell before the pull, or -1 when nothing was pulled. */
  pulledFrom: number;
  pulledFromCell: number;
  /** Index (by origin target) of the pulled box. */
  pulledBox: number;
  /** `last_pull` after the move (gym-sokoban's return value). */
  lastPull: number;
}

/** One node of the depth-first search: the state is the shared grid at this depth. */
interface Frame {
  player: number;
  boxes: BoxSummary;
  boxSwaps: number;
  lastPull: number;
  ttl: number;
  nextAction: number;
  /** The move that led here from the parent (null at the root). */
  arrivedBy: ReverseMove | null;
}

/**
 * What a state's score and key need from its boxes. Only pulls move boxes, so a plain
 * walk reuses its parent's summary and a state costs O(1) beyond hashing its key.
 */
interface BoxSummary {
  /** The box cells with their values (3 once pulled, 4 before), sorted: a canonical key part. */
  key: string;
  /** Sum over boxes of the Manhattan distance to the target it started on. */
  displacement: number;
  /** Boxes standing on a target cell. */
  onTargets: number;
}

/**
 * Depth-first reverse play from the solved room (gym-sokoban's `reverse_playing` /
 * `depth_first_search`): the player walks (actions 4-7) or walks and pulls the box behind
 * it (actions 0-3). The best state maximises `box_swaps * sum(Manhattan(box, its
 * target))` with every target uncovered.
 *
 * gym-sokoban recurses over whole-grid copies; this visits the same states in the same
 * order on one grid that is changed and put back (an explicit stack instead of
 * recursion), so it can yield between states and a state costs about O(1) instead of
 * O(cells). Moves that change nothing are skipped: gym-sokoban's child for them is the
 * parent's own, already explored, state and returns at once.
 */
function* reversePlay(solved: Uint8Array, fixed: Uint8Array, width: number): Work<{ state: Uint8Array; score: number; searched: number }> {
  const targets: number[] = [];
  for (let i = 0; i < fixed.length; i++) if (fixed[i] === CELL.target) targets.push(i);
  const state = solved.slice();
  const boxAt = targets.slice();
  const explored = new Set<string>();
  let bestState = solved;
  let bestScore = -1;
  const stack: Frame[] = [];

  /** gym-sokoban's entry checks for a child; pushes it and returns true when it is searched. */
  const enter = (player: number, boxes: BoxSummary, boxSwaps: number, lastPull: number, ttl: number, arrivedBy: ReverseMove | null): boolean => {
    ttl -= 1;
    if (ttl <= 0 || explored.size >= REVERSE_PLAY_MAX_STATES) return false;
    // The player's cell, then one code per box: a fixed layout, so keys are unambiguous.
    const key = String.fromCharCode(player) + boxes.key;
    if (explored.has(key)) return false;
    explored.add(key);
    const everyTargetUncovered = boxes.onTargets === 0 && fixed[player] !== CELL.target;
    const score = everyTargetUncovered ? boxSwaps * boxes.displacement : 0;
    if (score > bestScore) {
      bestState = state.slice();
      bestScore = score;
    }
    stack.push({ player, boxes, boxSwaps, lastPull, ttl, nextAction: 0, arrivedBy });
    return true;
  };

  enter(solved.indexOf(CELL.player), summarizeBoxes(state, fixed, boxAt, targets, width), 0, -1, REVERSE_PLAY_TTL, null);
  let visited = 0;
  while (stack.length > 0) {
    const frame = stack[stack.length - 1]!;
    if (frame.nextAction === 8) {
      stack.pop();
      if (frame.arrivedBy) undoReverseMove(state, boxAt, frame.arrivedBy);
      continue;
    }
    const move = applyReverseMove(state, fixed, width, boxAt, frame.lastPull, frame.player, frame.nextAction++);
    if (!move) continue;
    const boxes = move.pulledFrom >= 0 ? summarizeBoxes(state, fixed, boxAt, targets, width) : frame.boxes;
    const swaps = move.lastPull !== frame.lastPull ? frame.boxSwaps + 1 : frame.boxSwaps;
    // gym-sokoban passes the parent's `last_pull` down, not the updated one; kept as is
    // because it shapes which rooms score highest.
    if (!enter(move.to, boxes, swaps, frame.lastPull, frame.ttl, move)) undoReverseMove(state, boxAt, move);
    if (++visited % STATES_PER_YIELD === 0) yield;
  }
  return { state: bestState, score: bestScore, searched: explored.size };
}

function summarizeBoxes(state: Uint8Array, fixed: Uint8Array, boxAt: readonly number[], origins: readonly number[], width: number): BoxSummary {
  const codes = boxAt.map((cell) => cell * 2 + (state[cell] === CELL.boxOnTarget ? 1 : 0));
  codes.sort((a, b) => a - b);
  let displacement = 0;
  let onTargets = 0;
  for (let k = 0; k < boxAt.length; k++) {
    const a = boxAt[k]!;
    const b = origins[k]!;
    displacement += Math.abs(Math.floor(a / width) - Math.floor(b / width)) + Math.abs((a % width) - (b % width));
    if (fixed[a] === CELL.target) onTargets++;
  }
  return { key: String.fromCharCode(...codes), displacement, onTargets };
}

/**
 * gym-sokoban's `reverse_move` on the shared grid: returns what changed, or null when the
 * player cannot move (nothing changes then).
 */
function applyReverseMove(
  state: Uint8Array,
  fixed: Uint8Array,
  width: number,
  boxAt: number[],
  lastPull: number,
  player: number,
  action: number,
): ReverseMove | null {
  const [dr, dc] = PULL_DELTAS[action % 4]!;
  const to = player + dr * width + dc;
  const toCell = state[to]!;
  if (toCell !== CELL.floor && toCell !== CELL.target) return null;
  const move: ReverseMove = { from: player, to, toCell, pulledFrom: -1, pulledFromCell: 0, pulledBox: -1, lastPull };
  state[player] = fixed[player]!;
  state[to] = CELL.player;
  if (action < 4) {
    const behind = player - dr * width - dc;
    const behindCell = state[behind]!;
    if (behindCell === CELL.box || behindCell === CELL.boxOnTarget) {
      state[player] = CELL.boxOnTarget; // a pulled box; every box becomes "off target" at the end
      state[behind] = fixed[behind]!;
      move.pulledFrom = behind;
      move.pulledFromCell = behindCell;
      const k = boxAt.indexOf(behind);
      if (k >= 0) {
        boxAt[k] = player;
        move.pulledBox = k;
        move.lastPull = k;
      }
    }
  }
  return move;
}

function undoReverseMove(state: Uint8Array, boxAt: number[], move: ReverseMove): void {
  if (move.pulledFrom >= 0) {
    state[move.pulledFrom] = move.pulledFromCell;
    if (move.pulledBox >= 0) boxAt[move.pulledBox] = move.pulledFrom;
  }
  state[move.to] = move.toCell;
  state[move.from] = CELL.player;
}

/** Counts the states every search of one level has visited, against a budget. */
export interface SearchTally {
  states: number;
}

/** One room from `rng`: up to 4 topologies, each searched by reverse play. */
export function generateRoom(rng: Rng, options: RoomOptions): SokobanRoom {
  return finishNow(roomWork(rng, options));
}

/** `generateRoom` as work that yields while reverse play searches; adds its states to `tally`. */
export function* roomWork(rng: Rng, options: RoomOptions, tally: SearchTally = { states: 0 }): Work<SokobanRoom> {
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
    const result = yield* reversePlay(solved, fixed, width);
    tally.states += result.searched;
    state = result.state.map((cell) => (cell === CELL.boxOnTarget ? CELL.box : cell));
    score = result.score;
    if (score > 0) break;
  }
  if (score <= 0) throw new RoomGenerationError("reverse play found no state with every box off its target");
  return { height, width, fixed, state, numBoxes };
}

export interface LevelOptions extends RoomOptions {
  /** Accept only rooms whose BFS-optimal solution length is in [min, max]; null accepts any. */
  solutionRange: readonly [number, number] | null;
  /** Seeds tried in all (VAGEN's `reset_seed_max_tries`). */
  maxTries: number;
  bfsMaxDepth: number;
  /** BFS states per candidate before it counts as unsolved (default: no limit). */
  bfsMaxStates?: number;
  /**
   * Reverse-play and BFS states searched over all tries (default: no limit), checked
   * after each try. When it runs out with no room built at all, generation throws a
   * `LevelGenerationError`; otherwise the last room that missed the solution range is
   * used, as when `maxTries` runs out.
   */
  maxStates?: number;
}

export interface Level {
  room: SokobanRoom;
  /** The seed that produced the accepted room (after re-seeds). */
  seedUsed: number;
  /** BFS-optimal solution, when it was computed (only with a solution range). */
  solution: string[] | null;
  /** False when no room passed the filter within the limits and the last one is used. */
  accepted: boolean;
  tries: number;
}

/** No room could be built within the limit that ran out: the options cannot be met. */
export class LevelGenerationError extends RoomGenerationError {
  constructor(
    /** Which limit ran out. */
    readonly limit: "maxTries" | "maxStates",
    readonly tries: number,
    readonly statesSearched: number,
    /** Why the last try failed. */
    readonly lastFailure: string,
  ) {
    super(`no room could be generated in ${tries} tries, ${statesSearched} states searched (${limit}); last failure: ${lastFailure}`);
    this.name = "LevelGenerationError";
  }
}

/**
 * VAGEN's `PatchedSokobanEnv.reset`: generate from `seed`; if generation fails or the
 * optimal solution length is outside the range, re-seed with a stable hash of the seed's
 * decimal string and try again.
 */
export function generateLevel(seed: number, options: LevelOptions): Level {
  return finishNow(levelWork(seed, options));
}

/** `generateLevel` as work that yields while rooms are searched and solved. */
export function* levelWork(seed: number, options: LevelOptions): Work<Level> {
  const maxStates = options.maxStates ?? Infinity;
  const tally: SearchTally = { states: 0 };
  let current = seed;
  let last: { room: SokobanRoom; seed: number; solution: string[] | null } | null = null;
  let lastFailure = "";
  const fallBack = (tries: number, limit: LevelGenerationError["limit"]): Level => {
    if (!last) throw new LevelGenerationError(limit, tries, tally.states, lastFailure);
    return { room: last.room, seedUsed: last.seed, solution: last.solution, accepted: false, tries };
  };
  for (let attempt = 1; attempt <= options.maxTries; attempt++) {
    try {
      const room = yield* roomWork(new Rng(current), options, tally);
      if (options.solutionRange === null) return { room, seedUsed: current, solution: null, accepted: true, tries: attempt };
      const solution = yield* solutionWork(room, options.bfsMaxDepth, options.bfsMaxStates, tally);
      const length = solution?.length ?? 0;
      last = { room, seed: current, solution };
      const [min, max] = options.solutionRange;
      if (length >= min && length <= max) return { room, seedUsed: current, solution, accepted: true, tries: attempt };
      lastFailure = `the shortest solution has ${solution ? length : "no"} steps, outside [${min}, ${max}]`;
    } catch (err) {
      if (!(err instanceof RoomGenerationError)) throw err;
      lastFailure = err.message;
    }
    if (tally.states >= maxStates) return fallBack(attempt, "maxStates");
    current = nextRetrySeed(current);
    yield;
  }
  return fallBack(options.maxTries, "maxTries");
}
