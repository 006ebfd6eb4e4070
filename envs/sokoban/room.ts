/**
 * Sokoban room representation (gym-sokoban's encoding, spec 2.2).
 *
 * `fixed` holds the static layout (wall, floor, target); `state` the full picture
 * including boxes and the player. Both are row-major `Uint8Array`s of height * width.
 */

export const CELL = {
  wall: 0,
  floor: 1,
  target: 2,
  boxOnTarget: 3,
  box: 4,
  player: 5,
  /** Only produced by rendering: the player standing on a target. */
  playerOnTarget: 6,
} as const;

export type CellCode = (typeof CELL)[keyof typeof CELL];

export interface SokobanRoom {
  height: number;
  width: number;
  fixed: Uint8Array;
  state: Uint8Array;
  numBoxes: number;
}

export const ACTIONS = ["up", "down", "left", "right"] as const;
export type SokobanAction = (typeof ACTIONS)[number];

/** Row/column deltas, in the order of `ACTIONS` (gym-sokoban actions 1-4). */
export const DELTAS: Record<SokobanAction, readonly [number, number]> = {
  up: [-1, 0],
  down: [1, 0],
  left: [0, -1],
  right: [0, 1],
};

export function cloneRoom(room: SokobanRoom): SokobanRoom {
  return { ...room, fixed: room.fixed.slice(), state: room.state.slice() };
}

export function playerIndex(room: Pick<SokobanRoom, "state">): number {
  return room.state.indexOf(CELL.player);
}

/** Builds a room from text rows in the text-render symbols (`#_OX√PS`, spaces ignored). */
export function roomFromText(text: string): SokobanRoom {
  const rows = text
    .split("\n")
    .map((line) => line.replace(/\s+/g, ""))
    .filter((line) => line.length > 0);
  const height = rows.length;
  const width = rows[0]?.length ?? 0;
  const fixed = new Uint8Array(height * width);
  const state = new Uint8Array(height * width);
  let numBoxes = 0;
  rows.forEach((row, r) => {
    if ([...row].length !== width) throw new Error(`roomFromText: row ${r} has ${[...row].length} cells, expected ${width}`);
    [...row].forEach((ch, c) => {
      const i = r * width + c;
      const [f, s] = SYMBOL_CELLS[ch] ?? [-1, -1];
      if (f < 0) throw new Error(`roomFromText: unknown symbol "${ch}" at row ${r}, column ${c}`);
      fixed[i] = f;
      state[i] = s;
      if (s === CELL.box || s === CELL.boxOnTarget) numBoxes++;
    });
  });
  return { height, width, fixed, state, numBoxes };
}

const SYMBOL_CELLS: Record<string, readonly [number, number]> = {
  "#": [CELL.wall, CELL.wall],
  _: [CELL.floor, CELL.floor],
  O: [CELL.target, CELL.target],
  X: [CELL.floor, CELL.box],
  "√": [CELL.target, CELL.boxOnTarget],
  P: [CELL.floor, CELL.player],
  S: [CELL.target, CELL.player],
};
