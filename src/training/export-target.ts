/**
 * Where `vagen export` may write, and how the finished directory takes its place.
 *
 * An export replaces its target. A careless `--out` (the run folder, the checkpoint
 * itself, a folder of other work, a file) must never cost a run: so a target that holds
 * anything is refused unless the caller forces it, and a target that is, contains or lies
 * inside what the export reads (the checkpoint, its weights, the base model) is refused
 * even then. The new directory is built beside the target and renamed into place, so a
 * reader sees the old target or the whole new one, never half of either.
 */
import { existsSync, lstatSync, mkdirSync, mkdtempSync, readdirSync, realpathSync, renameSync, rmSync, type Stats } from "node:fs";
import { basename, dirname, join, relative, resolve, sep } from "node:path";
import { VagenError } from "../core/errors.ts";

/** A directory the export reads from, and what to call it in an error. */
export interface ExportSource {
  path: string;
  what: string;
}

/**
 * The absolute path with every symlink resolved, also for a path that does not exist
 * yet (its deepest existing ancestor is resolved), so `--out link-to-run` is recognised.
 */
export function canonicalPath(path: string): string {
  const abs = resolve(path);
  let head = abs;
  const tail: string[] = [];
  while (!existsSync(head) && dirname(head) !== head) {
    tail.unshift(basename(head));
    head = dirname(head);
  }
  return join(existsSync(head) ? realpathSync(head) : head, ...tail);
}

/** True when `inner` is `outer` or lies somewhere below it. */
function within(inner: string, outer: string): boolean {
  const rel = relative(outer, inner);
  return rel === "" || (!rel.startsWith(`..${sep}`) && rel !== ".." && !rel.startsWith(sep));
}

function statOrUndefined(path: string): Stats | undefined {
  try {
    return lstatSync(path);
  } catch {
    return undefined;
  }
}

/**
 * Throws unless `out` may be replaced by an export of `sources`: it must not be, contain
 * or lie inside any source (never, forced or not); and without `force` it must not exist,
 * or be an empty directory.
 */
export function checkExportTarget(out: string, sources: readonly ExportSource[], force: boolean): void {
  const target = canonicalPath(out);
  const canonical = sources.map((source) => ({ ...source, real: canonicalPath(source.path) }));
  // The closest relation names the error: "is the actor weights" before "is inside the checkpoint".
  const clash =
    canonical.filter((s) => target === s.real).map((s) => ({ s, how: "is" }))[0] ??
    canonical.filter((s) => within(s.real, target)).map((s) => ({ s, how: "contains" }))[0] ??
    canonical.filter((s) => within(target, s.real)).map((s) => ({ s, how: "is inside" }))[0];
  if (clash) {
    throw new VagenError(
      `--out ${out}: ${clash.how} ${clash.s.what} ${clash.s.path}; exporting there would destroy what the export reads`,
      "pass --out a new directory outside the run's checkpoint and the base model (--force does not change this)",
    );
  }
  const stat = statOrUndefined(target);
  if (!stat || force) return;
  if (!stat.isDirectory()) {
    throw new VagenError(`--out ${out}: is a file, expected a directory that does not exist yet or is empty`, "pass another --out, or --force to replace it");
  }
  const entries = readdirSync(target);
  if (entries.length > 0) {
    throw new VagenError(
      `--out ${out}: directory is not empty (${entries.length} entr${entries.length === 1 ? "y" : "ies"}, e.g. ${entries.sort()[0]}), expected a new or empty directory`,
      "pass another --out, or --force to replace its contents",
    );
  }
}

/**
 * A fresh, uniquely named directory beside `out` (created with its parents) to build the
 * export in; `out`'s own name is part of it, so a leftover is easy to place.
 */
export function stagingDirFor(out: string): string {
  const target = resolve(out);
  mkdirSync(dirname(target), { recursive: true });
  return mkdtempSync(join(dirname(target), `.${basename(target)}.tmp-`));
}

/**
 * Moves the finished `staging` directory to `out`. A missing target or an empty directory
 * is replaced by one rename; anything else (allowed by `checkExportTarget` only when
 * forced) is first moved aside and removed only once the new directory is in place, and
 * moved back if that fails.
 */
export function replaceWithStaged(staging: string, out: string): void {
  const target = resolve(out);
  const stat = statOrUndefined(target);
  if (!stat || (stat.isDirectory() && readdirSync(target).length === 0)) {
    renameSync(staging, target);
    return;
  }
  const aside = `${staging}.replaced`;
  renameSync(target, aside);
  try {
    renameSync(staging, target);
  } catch (err) {
    renameSync(aside, target);
    throw err;
  }
  rmSync(aside, { recursive: true, force: true });
}
