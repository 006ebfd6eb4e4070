/**
 * Admission control shared by every episode that uses one client: at most
 * `maxConcurrency` requests in flight, and at most `requestsPerMinute` request starts in
 * any sliding 60-second window. Waiting is cancellable with an AbortSignal so Ctrl-C never
 * hangs behind a queue.
 */
import { abortError } from "./errors.ts";

export interface RequestGateOptions {
  maxConcurrency: number;
  /** 0 or undefined: no rate limit. */
  requestsPerMinute?: number;
  /** Injected for tests; default Date.now. */
  now?: () => number;
  /** Injected for tests; default a real timer. */
  sleep?: (ms: number, signal?: AbortSignal) => Promise<void>;
}

interface Waiter {
  resolve: () => void;
  reject: (err: Error) => void;
}

const WINDOW_MS = 60_000;

export class RequestGate {
  private active = 0;
  private readonly queue: Waiter[] = [];
  /** Start times of requests within the last window (oldest first). */
  private readonly starts: number[] = [];
  private readonly now: () => number;

  constructor(private readonly options: RequestGateOptions) {
    if (!(options.maxConcurrency >= 1)) throw new RangeError(`maxConcurrency must be >= 1, got ${options.maxConcurrency}`);
    this.now = options.now ?? Date.now;
  }

  get inFlight(): number {
    return this.active;
  }

  /** Wait for a slot (and the rate limit); returns the function that frees the slot. */
  async acquire(signal?: AbortSignal): Promise<() => void> {
    await this.takeSlot(signal);
    try {
      await this.waitForRate(signal);
    } catch (err) {
      this.release();
      throw err;
    }
    let released = false;
    return () => {
      if (released) return;
      released = true;
      this.release();
    };
  }

  private takeSlot(signal?: AbortSignal): Promise<void> {
    if (signal?.aborted) return Promise.reject(abortError(signal));
    if (this.active < this.options.maxConcurrency) {
      this.active++;
      return Promise.resolve();
    }
    return new Promise<void>((resolve, reject) => {
      const waiter: Waiter = {
        resolve: () => {
          signal?.removeEventListener("abort", onAbort);
          resolve();
        },
        reject,
      };
      const onAbort = () => {
        const i = this.queue.indexOf(waiter);
        if (i >= 0) this.queue.splice(i, 1);
        reject(abortError(signal));
      };
      signal?.addEventListener("abort", onAbort, { once: true });
      this.queue.push(waiter);
    });
  }

  private release(): void {
    const next = this.queue.shift();
    // Hand the slot straight to the next waiter, so `active` never dips and lets a newcomer jump the queue.
    if (next) next.resolve();
    else this.active--;
  }

  private async waitForRate(signal?: AbortSignal): Promise<void> {
    const limit = this.options.requestsPerMinute ?? 0;
    if (limit <= 0) return;
    for (;;) {
      const now = this.now();
      while (this.starts.length > 0 && this.starts[0]! <= now - WINDOW_MS) this.starts.shift();
      if (this.starts.length < limit) {
        this.starts.push(now);
        return;
      }
      await (this.options.sleep ?? sleep)(this.starts[0]! + WINDOW_MS - now, signal);
    }
  }
}

/** setTimeout as a promise that rejects with an AbortError when `signal` fires. */
export function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  if (signal?.aborted) return Promise.reject(abortError(signal));
  return new Promise((resolve, reject) => {
    const onAbort = () => {
      clearTimeout(timer);
      reject(abortError(signal));
    };
    const timer = setTimeout(() => {
      signal?.removeEventListener("abort", onAbort);
      resolve();
    }, Math.max(0, ms));
    signal?.addEventListener("abort", onAbort, { once: true });
  });
}
