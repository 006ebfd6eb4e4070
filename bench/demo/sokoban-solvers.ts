/**
 * What VAGEN's Sokoban levels ask of a player, measured with solvers instead of a policy:
 *   lengths     the shortest solutions' lengths (how many levels of each)
 *   careless    levels the careless solver fails (src/sft/episodes.ts `boxBlindPlan`: the
 *               careful solver's next push, walked to through the box where a shortest
 *               walk crosses it), one move a turn within the turn limit
 *   greedy      levels failed by a solver that takes the push bringing the box closer to
 *               the target (walked to around the box, the shortest walk first; the
 *               careful solver when no push brings it closer)
 *   pushes      over every room reachable within the turn limit, the pushes that bring
 *               the box closer and those that do not, and how many of each leave the
 *               level unsolvable (`deadlocks`); `levelsWithCloserDeadlock` counts the
 *               levels that have a room where a closer push deadlocks
 *
 *   bun bench/demo/sokoban-solvers.ts '{"levels":400,"seedStart":100000}'
 *
 * Options (JSON): levels (400), seedStart (100000), steps ([1, 5]: min_solution_steps),
 * turns (9).
 */
import { SokobanEnv } from "../../envs/sokoban/env.ts";
import { allBoxesOnTarget, applyMove } from "../../envs/sokoban/dynamics.ts";
import { ACTIONS, CELL, DELTAS, cloneRoom, playerIndex, type SokobanAction, type SokobanRoom } from "../../envs/sokoban/room.ts";
import { shortestSolution } from "../../envs/sokoban/solver.ts";
import { boxBlindPlan } from "../../src/sft/episodes.ts";

const o = { levels: 400, seedStart: 100_000, steps: [1, 5], turns: 9, ...JSON.parse(process.argv[2] ?? "{}") };

const boxCell = (room: SokobanRoom) => room.state.findIndex((cell) => cell === CELL.box || cell === CELL.boxOnTarget);
const targetCell = (room: SokobanRoom) => room.fixed.findIndex((cell) => cell === CELL.target);
const manhattan = (room: SokobanRoom, a: number, b: number) =>
  Math.abs(Math.floor(a / room.width) - Math.floor(b / room.width)) + Math.abs((a % room.width) - (b % room.width));
const unsolvable = (room: SokobanRoom) => shortestSolution(room, 30) === null;

/** The shortest walk from the player to `to` over floor and targets (the box in the way), or null. */
function walkAround(room: SokobanRoom, to: number): SokobanAction[] | null {
  const from = playerIndex(room);
  const previous = new Map<number, { cell: number; move: SokobanAction }>();
  const seen = new Set([from]);
  for (let frontier = [from]; frontier.length > 0 && !seen.has(to); ) {
    const next: number[] = [];
    for (const cell of frontier) {
      for (const move of ACTIONS) {
        const [dr, dc] = DELTAS[move];
        const row = Math.floor(cell / room.width) + dr;
        const col = (cell % room.width) + dc;
        const step = row * room.width + col;
        if (row < 0 || col < 0 || row >= room.height || col >= room.width || seen.has(step)) continue;
        if (room.state[step] !== CELL.floor && room.state[step] !== CELL.target) continue;
        seen.add(step);
        previous.set(step, { cell, move });
        next.push(step);
      }
    }
    frontier = next;
  }
  if (!seen.has(to)) return null;
  const walk: SokobanAction[] = [];
  for (let cell = to; cell !== from; cell = previous.get(cell)!.cell) walk.push(previous.get(cell)!.move);
  return walk.reverse();
}

/** The greedy solver's plan: the reachable push that brings the box closer with the shortest walk. */
function greedyPlan(room: SokobanRoom): SokobanAction[] {
  const box = boxCell(room);
  const target = targetCell(room);
  let best: SokobanAction[] | null = null;
  for (const move of ACTIONS) {
    const [dr, dc] = DELTAS[move];
    const row = Math.floor(box / room.width);
    const col = box % room.width;
    const inside = (r: number, c: number) => r >= 0 && c >= 0 && r < room.height && c < room.width;
    if (!inside(row + dr, col + dc) || !inside(row - dr, col - dc)) continue;
    const to = (row + dr) * room.width + col + dc;
    const from = (row - dr) * room.width + col - dc;
    if (room.fixed[to] === CELL.wall || room.fixed[from] === CELL.wall || manhattan(room, to, target) >= manhattan(room, box, target)) continue;
    const walk = from === playerIndex(room) ? [] : walkAround(room, from);
    if (walk && (!best || walk.length + 1 < best.length)) best = [...walk, move];
  }
  return best ?? shortestSolution(room, 100, 50_000) ?? [];
}

/** Whether replanning every turn and playing the plan's first move solves the level within the turn limit. */
function solves(level: SokobanRoom, plan: (room: SokobanRoom) => SokobanAction[]): boolean {
  const room = cloneRoom(level);
  for (let turn = 0; turn < o.turns; turn++) {
    const moves = plan(room);
    if (moves.length === 0) return false;
    applyMove(room, playerIndex(room), moves[0]!);
    if (allBoxesOnTarget(room)) return true;
  }
  return false;
}

const env = new SokobanEnv({ dim_room: [6, 6], num_boxes: 1, min_solution_steps: o.steps, render_mode: "text" });
const lengths: Record<number, number> = {};
const failed = { careless: 0, greedy: 0 };
const pushes = { closer: 0, closerDeadlocks: 0, notCloser: 0, notCloserDeadlocks: 0, levelsWithCloserDeadlock: 0 };
for (let i = 0; i < o.levels; i++) {
  await env.reset(o.seedStart + i);
  const level = cloneRoom(env.currentRoom!);
  const length = shortestSolution(level)!.length;
  lengths[length] = (lengths[length] ?? 0) + 1;
  if (!solves(level, boxBlindPlan)) failed.careless++;
  if (!solves(level, greedyPlan)) failed.greedy++;
  // Every room reachable within the turn limit, breadth first, and every push from each.
  const target = targetCell(level);
  const seen = new Set([level.state.join()]);
  let closerDeadlock = false;
  let frontier = [level];
  for (let depth = 0; depth < o.turns && frontier.length > 0; depth++) {
    const next: SokobanRoom[] = [];
    for (const room of frontier) {
      if (allBoxesOnTarget(room)) continue;
      const box = boxCell(room);
      for (const move of ACTIONS) {
        const after = cloneRoom(room);
        const result = applyMove(after, playerIndex(after), move);
        if (!result.moved) continue;
        if (result.pushedBox) {
          const dead = unsolvable(after);
          if (manhattan(after, boxCell(after), target) < manhattan(room, box, target)) {
            pushes.closer++;
            if (dead) {
              pushes.closerDeadlocks++;
              closerDeadlock = true;
            }
          } else {
            pushes.notCloser++;
            if (dead) pushes.notCloserDeadlocks++;
          }
        }
        const key = after.state.join();
        if (seen.has(key)) continue;
        seen.add(key);
        next.push(after);
      }
    }
    frontier = next;
  }
  if (closerDeadlock) pushes.levelsWithCloserDeadlock++;
}
console.log(JSON.stringify({ levels: o.levels, seedStart: o.seedStart, lengths, failed, pushes }));
