/**
 * The kinds of config file vagen reads (eval, train, ...), so `vagen config show` can
 * validate any of them. Each subsystem registers its schema next to its code.
 */
import type * as v from "valibot";
import type { ConfigTree } from "./load.ts";

export interface ConfigKind {
  name: string;
  description: string;
  schema: v.GenericSchema;
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
