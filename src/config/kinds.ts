/**
 * The kinds of config file vagen reads (eval, train, ...), so `vagen config show` can
 * validate any of them. Each subsystem registers its schema next to its code.
 */
import type * as v from "valibot";
import type { ConfigTree, ResolvedConfig } from "./load.ts";

export interface ConfigKind {
  name: string;
  description: string;
  schema: v.GenericSchema;
  /**
   * The kind's whole validation, exactly what the command that runs such a config does
   * before it starts (schema, checks across keys, nested configs such as an env's),
   * returning the checked config. Without it, the schema alone is checked.
   */
  load?(resolved: ResolvedConfig): Promise<unknown>;
  /** True when a resolved config looks like this kind (used when --kind is not given). */
  detect(data: ConfigTree): boolean;
}

const kinds = new Map<string, ConfigKind>();

export function registerConfigKind(kind: ConfigKind): void {
  kinds.set(kind.name, kind);
}

export function configKinds(): ConfigKind[] {
  return [...kinds.values()];
}

export function configKind(name: string): ConfigKind | undefined {
  return kinds.get(name);
}
