/**
 * Retry timing: exponential backoff with jitter, or the server's Retry-After when it
 * gives one.
 */

export interface RetryPolicy {
  /** Retries after the first attempt (so at most maxRetries + 1 requests). */
  maxRetries: number;
  /** First backoff; doubles each retry. */
  minBackoffMs: number;
  /** Cap on the exponential backoff. */
  maxBackoffMs: number;
  /** Cap on a server-requested Retry-After wait (a misbehaving server can't stall a run). */
  maxRetryAfterMs: number;
  /** Extra random wait, as a fraction of the backoff (0.25 = up to 25% more). */
  jitter: number;
  /** Injected for deterministic tests; defaults to Math.random. */
  random?: () => number;
}

export const DEFAULT_RETRY_POLICY: RetryPolicy = {
  maxRetries: 6,
  minBackoffMs: 500,
  maxBackoffMs: 8_000,
  maxRetryAfterMs: 60_000,
  jitter: 0.25,
};

/**
 * Milliseconds to wait before retry number `retry` (1-based). Jitter spreads out clients
 * that failed together so they don't retry in lockstep.
 */
export function backoffDelay(policy: RetryPolicy, retry: number, retryAfterMs?: number): number {
  if (retryAfterMs !== undefined && retryAfterMs >= 0) return Math.min(retryAfterMs, policy.maxRetryAfterMs);
  const base = Math.min(policy.maxBackoffMs, policy.minBackoffMs * 2 ** (retry - 1));
  const random = policy.random ?? Math.random;
  return base * (1 + policy.jitter * random());
}

/**
 * A Retry-After header value in milliseconds: either delay-seconds ("2", "0.5") or an
 * HTTP date. Undefined when absent or unreadable.
 */
export function parseRetryAfter(value: string | null, now = Date.now()): number | undefined {
  if (value === null) return undefined;
  const text = value.trim();
  if (text === "") return undefined;
  if (/^\d+(\.\d+)?$/.test(text)) return Number(text) * 1000;
  const date = Date.parse(text);
  if (Number.isNaN(date)) return undefined;
  return Math.max(0, date - now);
}
