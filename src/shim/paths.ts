/**
 * Where vagen keeps what it builds on a machine: $VAGEN_CACHE_DIR, else
 * $XDG_CACHE_HOME/vagen, else ~/.cache/vagen. Shims compiled on first use live in
 * `shims/`, one folder per libtorch build and flag set.
 */
import { homedir } from "node:os";
import { join } from "node:path";

export function cacheRoot(env: NodeJS.ProcessEnv = process.env): string {
  if (env.VAGEN_CACHE_DIR) return env.VAGEN_CACHE_DIR;
  if (env.XDG_CACHE_HOME) return join(env.XDG_CACHE_HOME, "vagen");
  return join(homedir(), ".cache", "vagen");
}

export function shimCacheDir(env: NodeJS.ProcessEnv = process.env): string {
  return join(cacheRoot(env), "shims");
}

/** `~/...` for a path under the home directory, in messages. */
export function tildify(path: string): string {
  const home = homedir();
  return path === home || path.startsWith(`${home}/`) ? `~${path.slice(home.length)}` : path;
}
