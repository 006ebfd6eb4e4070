/**
 * One run per run folder. Two trainers writing one folder interleave their metrics.jsonl
 * lines and overwrite each other's checkpoints, and the result looks like a good run. A
 * trainer therefore takes `<dir>/.lock` before it writes anything and gives it back when
 * it ends.
 *
 * The lock file holds who took it (pid, host, start time, a random token) and comes into
 * being complete: it is written under a unique name and hard-linked to `.lock`, which
 * fails if `.lock` exists, so no reader ever sees a half-written lock. A lock whose holder
 * is gone (same host, no such process, or a process of that pid started at another time)
 * is stale and taken over; one held by a live process, or by another host (which cannot
 * be checked from here), is refused with an error naming the holder. Release removes the
 * file only while it is still this holder's, is idempotent, and also runs at process exit.
 */
import { randomBytes } from "node:crypto";
import { closeSync, fsyncSync, linkSync, openSync, readFileSync, renameSync, rmSync, writeFileSync, writeSync } from "node:fs";
import { hostname } from "node:os";
import { join } from "node:path";
import { VagenError } from "../core/errors.ts";

/** The lock's file name inside a run folder. */
export const LOCK_FILE = ".lock";

/** What a lock file says about its holder. */
export interface RunLockHolder {
  pid: number;
  host: string;
  /** When the lock was taken (ISO 8601). */
  started: string;
  /** Unique to one acquisition, so a holder recognises its own lock. */
  token: string;
  /** The holder process's start time in clock ticks since boot (Linux), to tell a reused pid. */
  procStart?: string;
}

export interface RunLock {
  /** The lock file. */
  readonly path: string;
  /** Give the lock back; does nothing if it was given back already or is no longer ours. */
  release(): void;
}

/** Tokens of the locks this process holds now: a lock naming this pid with another token is stale. */
const held = new Set<string>();

/** Takeover attempts before giving up on a lock that keeps changing hands. */
const ATTEMPTS = 5;

/** A process's start time (field 22 of /proc/<pid>/stat), where /proc exists. */
function processStart(pid: number): string | undefined {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
    // The command name (field 2) may hold spaces and parentheses: count from the last ")".
    return stat.slice(stat.lastIndexOf(")") + 2).split(" ")[19];
  } catch {
    return undefined;
  }
}

function readHolder(path: string): RunLockHolder | "unreadable" | undefined {
  let text: string;
  try {
    text = readFileSync(path, "utf8");
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === "ENOENT") return undefined;
    return "unreadable";
  }
  try {
    const holder = JSON.parse(text) as Partial<RunLockHolder>;
    if (typeof holder.pid !== "number" || typeof holder.host !== "string" || typeof holder.token !== "string") return "unreadable";
    return { started: "an unknown time", ...holder } as RunLockHolder;
  } catch {
    return "unreadable";
  }
}

/** Why `holder` no longer holds its lock, or undefined while it may still. */
function staleReason(holder: RunLockHolder): string | undefined {
  if (holder.host !== hostname()) return undefined; // another machine's process: cannot tell
  if (holder.pid === process.pid) return held.has(holder.token) ? undefined : "left by an earlier process with this pid";
  try {
    process.kill(holder.pid, 0);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === "ESRCH") return "its process is gone";
    return undefined; // EPERM: alive, another user's
  }
  const start = processStart(holder.pid);
  if (holder.procStart !== undefined && start !== undefined && start !== holder.procStart) return "its pid now belongs to another process";
  return undefined;
}

/**
 * Creates `path` holding `content`, or returns false if it exists. The content is written
 * to a unique file first and linked into place, so `path` is never seen half-written;
 * where hard links are not supported, an exclusive create is the fallback.
 */
function createExclusive(path: string, content: string): boolean {
  const temporary = `${path}.${process.pid}.${randomBytes(4).toString("hex")}`;
  writeFileSync(temporary, content, { flag: "wx" });
  try {
    linkSync(temporary, path);
    return true;
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    if (code === "EEXIST") return false;
    if (code !== "EPERM" && code !== "ENOTSUP" && code !== "EOPNOTSUPP" && code !== "EXDEV") throw err;
  } finally {
    rmSync(temporary, { force: true });
  }
  let fd: number;
  try {
    fd = openSync(path, "wx");
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === "EEXIST") return false;
    throw err;
  }
  try {
    writeSync(fd, content);
    fsyncSync(fd);
  } finally {
    closeSync(fd);
  }
  return true;
}

/**
 * Moves a stale lock out of the way. Another process may have taken it over and put its
 * own lock there since it was read: the moved file is checked, and a live lock is put back.
 */
function removeStale(path: string, stale: RunLockHolder): void {
  const aside = `${path}.stale-${process.pid}-${randomBytes(4).toString("hex")}`;
  try {
    renameSync(path, aside);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === "ENOENT") return; // someone else moved it
    throw err;
  }
  const moved = readHolder(aside);
  if (typeof moved === "object" && moved.token !== stale.token) {
    try {
      linkSync(aside, path);
    } catch {
      // A third lock is there already; the one moved aside has lost its place either way.
    }
  }
  rmSync(aside, { force: true });
}

function refusal(dir: string, path: string, holder: RunLockHolder): VagenError {
  const where = holder.host === hostname() ? "" : ` on host ${holder.host}`;
  return new VagenError(
    `${dir}: another run is using this run folder (pid ${holder.pid}${where}, since ${holder.started}; lock file ${path})`,
    holder.host === hostname()
      ? `wait for it to end or stop it (kill ${holder.pid}), or use another trainer.output_dir`
      : `its host cannot be checked from here: if that run has ended, remove ${path}; otherwise use another trainer.output_dir`,
  );
}

/** Takes the run folder `dir` (which must exist) for this process; throws if another run holds it. */
export function acquireRunLock(dir: string): RunLock {
  const path = join(dir, LOCK_FILE);
  const me: RunLockHolder = { pid: process.pid, host: hostname(), started: new Date().toISOString(), token: randomBytes(16).toString("hex") };
  const start = processStart(process.pid);
  if (start !== undefined) me.procStart = start;
  const content = `${JSON.stringify(me)}\n`;
  for (let attempt = 0; attempt < ATTEMPTS; attempt++) {
    if (createExclusive(path, content)) return holdLock(path, me.token);
    const holder = readHolder(path);
    if (holder === undefined) continue; // released between our try and our look
    if (holder === "unreadable") {
      throw new VagenError(`${path}: the run folder's lock file cannot be read (expected JSON with the holder's pid and host)`, `if no run is using ${dir}, remove ${path}`);
    }
    if (staleReason(holder) === undefined) throw refusal(dir, path, holder);
    removeStale(path, holder);
  }
  throw new VagenError(`${path}: the run folder's lock keeps changing hands; another run is starting in ${dir}`, "start one run per trainer.output_dir");
}

function holdLock(path: string, token: string): RunLock {
  held.add(token);
  let released = false;
  const release = () => {
    if (released) return;
    released = true;
    held.delete(token);
    process.off("exit", release);
    const holder = readHolder(path);
    if (typeof holder === "object" && holder.token === token) rmSync(path, { force: true });
  };
  process.on("exit", release);
  return { path, release };
}
