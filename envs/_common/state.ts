/**
 * Ground-truth grid state for world-model rewards (state estimation / transition
 * modelling): where every object is, and how it relates to the player, in the terms the
 * prompts ask the model to use. Emitted as `info.state` by the grid envs.
 */

export type Position = [row: number, col: number];
export type VerticalRelation = "above" | "below" | "same";
export type HorizontalRelation = "left" | "right" | "same";

export interface GridObject {
  /** Object kind as the prompts name it: `box`, `target`, `goal`, `hole`. */
  object_id: string;
  position: Position;
  /** Relative to the player; row 0 is the top, so "above" means a smaller row. */
  vertical_relation: VerticalRelation;
  horizontal_relation: HorizontalRelation;
  [extra: string]: unknown;
}

export interface GridState {
  grid_size: [rows: number, cols: number];
  player: Position;
  objects: GridObject[];
}

export function relationTo(player: Position, position: Position): Pick<GridObject, "vertical_relation" | "horizontal_relation"> {
  return {
    vertical_relation: position[0] < player[0] ? "above" : position[0] > player[0] ? "below" : "same",
    horizontal_relation: position[1] < player[1] ? "left" : position[1] > player[1] ? "right" : "same",
  };
}

export function gridObject(objectId: string, player: Position, position: Position, extra: Record<string, unknown> = {}): GridObject {
  return { object_id: objectId, position, ...relationTo(player, position), ...extra };
}

/**
 * The relation phrased as main's `wm` prompt asks ("above and same column of the player"),
 * handy for judges and tests.
 */
export function describeRelation(obj: GridObject): string {
  const vertical = obj.vertical_relation === "same" ? "same row" : obj.vertical_relation;
  const horizontal = obj.horizontal_relation === "same" ? "same column" : obj.horizontal_relation;
  return `${obj.object_id} is ${vertical} and ${horizontal} of the player`;
}
