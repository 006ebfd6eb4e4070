/**
 * `key=value` arguments (env configs on the command line: `vagen env play Sokoban
 * dim_room=[8,8] num_boxes=2`) into a nested object, values read like overrides.
 */
import { applyOverrides, parseOverride } from "./overrides.ts";

export function parseKeyValues(args: string[]): Record<string, unknown> {
  return applyOverrides({}, args.map(parseOverride));
}
