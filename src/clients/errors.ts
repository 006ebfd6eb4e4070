/**
 * Errors raised by inference clients. `retryable` drives the retry loop: rate limits,
 * server errors, timeouts and network failures are worth another try; a bad request or a
 * rejected key is not.
 */
import { VagenError } from "../core/errors.ts";

export class InferenceError extends VagenError {
  constructor(
    message: string,
    readonly retryable: boolean,
    /** HTTP status, when the server answered. */
    readonly status?: number,
    /** How long the server asked us to wait (Retry-After), in milliseconds. */
    readonly retryAfterMs?: number,
    hint?: string,
  ) {
    super(message, hint);
    this.name = "InferenceError";
  }
}

/** The caller aborted (Ctrl-C, shutdown): never retried, never recorded as a model error. */
export function isAbortError(err: unknown): boolean {
  return err instanceof Error && err.name === "AbortError";
}

export function abortError(signal?: AbortSignal): Error {
  const reason = signal?.reason;
  if (reason instanceof Error && reason.name === "AbortError") return reason;
  return new DOMException("the operation was aborted", "AbortError");
}

/** HTTP statuses worth retrying: request timeout, rate limit, and server-side failures. */
export function isRetryableStatus(status: number): boolean {
  return status === 408 || status === 409 || status === 429 || status >= 500;
}
