/**
 * A room's ground-truth state as the world-model rewards read it (`info.state`): the
 * player, every box (on a target or not) and every target (covered or not), each
 * relative to the player. Exported so that a solver writing world-model demonstrations
 * states exactly what the env would report.
 */
import { gridObject, type GridObject, type GridState, type Position } from "../_common/state.ts";
import { CELL, playerIndex, type SokobanRoom } from "./room.ts";

export function sokobanGridState(room: SokobanRoom, player = playerIndex(room)): GridState {
  const position = (index: number): Position => [Math.floor(index / room.width), index % room.width];
  const at = position(player);
  const objects: GridObject[] = [];
  for (let i = 0; i < room.state.length; i++) {
    const cell = room.state[i];
    if (cell === CELL.box || cell === CELL.boxOnTarget) objects.push(gridObject("box", at, position(i), { on_target: cell === CELL.boxOnTarget }));
  }
  for (let i = 0; i < room.fixed.length; i++) {
    if (room.fixed[i] === CELL.target) objects.push(gridObject("target", at, position(i), { covered: room.state[i] === CELL.boxOnTarget }));
  }
  return { grid_size: [room.height, room.width], player: at, objects };
}
