/**
 * Breadth-first shortest solution (spec 2.4), over compact states (player cell + sorted
 * box cells) instead of whole grids. Actions are tried in the order up, down, left, right,
 * so the returned path is the same one VAGEN's grid BFS finds.
 */
import { finishNow, type Work } from "../_common/cooperative.ts";
import { ACTIONS, CELL, DELTAS, type SokobanAction, type SokobanRoom } from "./room.ts";

/** States expanded between two yields. */
const STATES_PER_YIELD = 256;

/**
 * The shortest action sequence that puts every box on a target, or `null` when none
 * exists within `maxDepth` moves, or none was found among the first `maxStates` states
 * (the search's memory grows with them). An already solved room gives `[]`.
 */
export function shortestSolution(room: SokobanRoom, maxDepth = 200, maxStates = Infinity): SokobanAction[] | null {
  return finishNow(solutionWork(room, maxDepth, maxStates));
}

/** `shortestSolution` as work that yields between expanded states; adds the states it saw to `tally`. */
export function* solutionWork(
  room: SokobanRoom,
  maxDepth = 200,
  maxStates = Infinity,
  tally: { states: number } = { states: 0 },
): Work<SokobanAction[] | null> {
  const found = yield* breadthFirst(room, maxDepth, maxStates);
  tally.states += found.searched;
  return found.path;
}

function* breadthFirst(room: SokobanRoom, maxDepth: number, maxStates: number): Work<{ path: SokobanAction[] | null; searched: number }> {
  const { width, height, fixed, state } = room;
  let player = -1;
  const boxes: number[] = [];
  for (let i = 0; i < state.length; i++) {
    if (state[i] === CELL.player) player = i;
    else if (state[i] === CELL.box || state[i] === CELL.boxOnTarget) boxes.push(i);
  }
  if (player < 0) return { path: null, searched: 0 };
  const solved = (bs: readonly number[]) => bs.every((b) => fixed[b] === CELL.target);
  if (solved(boxes)) return { path: [], searched: 1 };

  interface Node {
    player: number;
    boxes: number[];
    parent: Node | null;
    action: SokobanAction | null;
    depth: number;
  }
  const keyOf = (p: number, bs: readonly number[]) => `${p}:${bs.join(",")}`;
  const seen = new Set<string>([keyOf(player, boxes)]);
  let frontier: Node[] = [{ player, boxes, parent: null, action: null, depth: 0 }];

  let expanded = 0;
  while (frontier.length > 0) {
    const next: Node[] = [];
    for (const node of frontier) {
      // Children would exceed the depth cap, or the search has grown past its state cap.
      if (node.depth >= maxDepth || seen.size > maxStates) return { path: null, searched: seen.size };
      if (++expanded % STATES_PER_YIELD === 0) yield;
      const pr = Math.floor(node.player / width);
      const pc = node.player % width;
      for (const action of ACTIONS) {
        const [dr, dc] = DELTAS[action];
        const nr = pr + dr;
        const nc = pc + dc;
        if (nr < 0 || nc < 0 || nr >= height || nc >= width) continue;
        const np = nr * width + nc;
        if (fixed[np] === CELL.wall) continue;
        let nextBoxes = node.boxes;
        const boxIndex = node.boxes.indexOf(np);
        if (boxIndex >= 0) {
          const br = nr + dr;
          const bc = nc + dc;
          if (br < 0 || bc < 0 || br >= height || bc >= width) continue;
          const nb = br * width + bc;
          if (fixed[nb] === CELL.wall || node.boxes.includes(nb)) continue;
          nextBoxes = node.boxes.slice();
          nextBoxes[boxIndex] = nb;
          nextBoxes.sort((a, b) => a - b);
        }
        const key = keyOf(np, nextBoxes);
        if (seen.has(key)) continue;
        seen.add(key);
        const child: Node = { player: np, boxes: nextBoxes, parent: node, action, depth: node.depth + 1 };
        if (solved(nextBoxes)) return { path: pathTo(child), searched: seen.size };
        next.push(child);
      }
    }
    frontier = next;
  }
  return { path: null, searched: seen.size };

  function pathTo(node: Node): SokobanAction[] {
    const path: SokobanAction[] = [];
    for (let n: Node | null = node; n && n.action; n = n.parent) path.push(n.action);
    return path.reverse();
  }
}
