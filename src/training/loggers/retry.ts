/**
 * The loggers' network manners: every request has a time limit, a failure is sorted into
 * "try again later" (no connection, a timeout, 408, 429, 5xx) or "will never work" (a
 * refused key, a missing project), and retries back off exponentially with jitter up to
 * a ceiling, so an outage costs a request every minute, not a loop of them.
 *
 * Nothing here throws into the trainer: the callers run in the background and turn
 * failures into counts and one warning.
 */
import { redactText } from "../../config/redact.ts";

export interface RetryPolicy {
  /** The first wait after a failure. */
  baseMs: number;
  /** The longest wait between two tries. */
  maxMs: number;
}

export const DEFAULT_RETRY: RetryPolicy = { baseMs: 1000, maxMs: 60_000 };

/** The wait before try `attempt + 1` (attempt 0 is the first failure): base·2^attempt, capped, plus up to 25% jitter. */
export function backoffMs(attempt: number, policy: RetryPolicy, random: () => number = Math.random): number {
  const plain = Math.min(policy.maxMs, policy.baseMs * 2 ** Math.min(attempt, 30));
  return Math.round(plain * (1 + 0.25 * random()));
}

/** A failed request: `status` 0 when no response came (refused, reset, timed out). */
export class RequestError extends Error {
  constructor(
    message: string,
    readonly status: number,
    readonly retriable: boolean,
  ) {
    super(message);
    this.name = "RequestError";
  }
}

export function isRetriableStatus(status: number): boolean {
  return status === 0 || status === 408 || status === 429 || status >= 500;
}

/**
 * fetch with a time limit (and `cancel`, which the end of a run aborts so no request
 * outlives it); a non-2xx answer or no answer becomes a RequestError whose
 * message names the method, the URL (credentials redacted) and the server's first words.
 */
export async function fetchOk(url: string, init: RequestInit, timeoutMs = 30_000, cancel?: AbortSignal): Promise<Response> {
  const what = `${init.method ?? "GET"} ${redactText(url)}`;
  let res: Response;
  try {
    const timeout = AbortSignal.timeout(timeoutMs);
    res = await fetch(url, { ...init, signal: cancel ? AbortSignal.any([cancel, timeout]) : timeout });
  } catch (err) {
    throw new RequestError(`${what}: ${redactText((err as Error).message)}`, 0, true);
  }
  if (!res.ok) {
    const body = await res.text().catch(() => "");
    throw new RequestError(`${what}: HTTP ${res.status}${body ? ` (${redactText(body.slice(0, 200).trim())})` : ""}`, res.status, isRetriableStatus(res.status));
  }
  return res;
}

/**
 * A sleep that can be cut short: the background loops wait on it between tries and for
 * new work, and the end of a run wakes them so they try once more at once.
 */
export class Waker {
  #wake: (() => void) | undefined;

  sleep(ms: number): Promise<void> {
    return new Promise((resolve) => {
      // unref'd: a background loop's wait never keeps the process alive on its own
      const timer = setTimeout(done, ms);
      (timer as { unref?: () => void }).unref?.();
      const self = this;
      function done() {
        clearTimeout(timer);
        if (self.#wake === done) self.#wake = undefined;
        resolve();
      }
      this.#wake = done;
    });
  }

  wake(): void {
    this.#wake?.();
  }
}

/** Resolves true when `work` settles within `ms`, false otherwise (the work goes on). */
export async function within(work: Promise<unknown>, ms: number): Promise<boolean> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  const timeout = new Promise<false>((resolve) => (timer = setTimeout(() => resolve(false), ms)));
  try {
    return await Promise.race([work.then(() => true, () => true), timeout]);
  } finally {
    clearTimeout(timer);
  }
}
