/**
 * Output write failures, said so a person can act on them. A full disk (ENOSPC), a
 * read-only mount or a path through a regular file surfaces from node:fs as
 * "ENOSPC: no space left on device, write" with no hint of which of a run's many files
 * it was; every writer of run outputs (eval episode folders and summaries, the trainer's
 * rollouts/, batches/ and metrics) goes through `guardWrite`, so the error names the path
 * it was writing and what to change.
 */
import { VagenError } from "../core/errors.ts";

/** What to do about a failed eval write. */
export const EVAL_WRITE_HINT = "free disk space, or point output_dir somewhere writable";

/** A write of a run's outputs failed; `path` is what was being written. */
export class OutputWriteError extends VagenError {
  constructor(
    readonly path: string,
    /** The fs error code (ENOSPC, EACCES, ENOTDIR, ...), when there is one. */
    readonly code: string | undefined,
    detail: string,
    hint: string,
  ) {
    super(`could not write ${path}: ${code ? `${code} ` : ""}${detail}`, hint);
    this.name = "OutputWriteError";
  }
}

/** `err` (from node:fs) as an `OutputWriteError` for `path`; one already is stays as it is. */
export function writeFailure(path: string, err: unknown, hint: string): OutputWriteError {
  if (err instanceof OutputWriteError) return err;
  const code = typeof (err as { code?: unknown })?.code === "string" ? (err as { code: string }).code : undefined;
  const message = err instanceof Error ? err.message : String(err);
  // node:fs messages start with the code ("ENOSPC: no space left on device, write"): say it once.
  const detail = code && message.startsWith(`${code}: `) ? message.slice(code.length + 2) : message;
  return new OutputWriteError(path, code, detail, hint);
}

/** True for the errors node:fs throws (they carry a system error code such as ENOSPC). */
function isFsError(err: unknown): boolean {
  return err instanceof Error && typeof (err as { code?: unknown }).code === "string";
}

/**
 * Runs `write`, turning an fs error it throws into an `OutputWriteError` for `path`.
 * Anything else (a bug in what is being serialised) passes through unchanged.
 */
export function guardWrite<T>(path: string, hint: string, write: () => T): T {
  try {
    return write();
  } catch (err) {
    throw isFsError(err) ? writeFailure(path, err, hint) : err;
  }
}
