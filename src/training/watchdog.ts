/**
 * The watchdog: a phase that makes no progress for `limitSeconds` ends the run with a
 * message naming the phase and what it waited for. Progress is any `touch()` (an episode
 * finishing, a phase starting). It guards the asynchronous phases (rollouts: envs and
 * remote envs that hang, generation that stalls); a synchronous libtorch call cannot be
 * interrupted from JavaScript, and is not what hangs in practice.
 */
import { VagenError } from "../core/errors.ts";

export class Watchdog {
  #last = performance.now();
  #timers = new Set<ReturnType<typeof setInterval>>();

  constructor(readonly limitSeconds: number) {}

  touch(): void {
    this.#last = performance.now();
  }

  /** Runs fn; rejects if no progress is reported for the limit while it runs. */
  async guard<T>(phase: string, waitingFor: string, fn: () => T | Promise<T>): Promise<T> {
    this.touch();
    if (!(this.limitSeconds > 0)) return await fn();
    let timer: ReturnType<typeof setInterval> | undefined;
    const stalled = new Promise<never>((_, reject) => {
      timer = setInterval(() => {
        const idle = (performance.now() - this.#last) / 1000;
        if (idle >= this.limitSeconds) {
          reject(
            new VagenError(
              `watchdog: phase "${phase}" made no progress for ${Math.round(idle)} s (trainer.watchdog_s = ${this.limitSeconds}); it was waiting for ${waitingFor}`,
              "the last checkpoint is intact; look at the env or the device, then resume (trainer.resume=auto)",
            ),
          );
        }
      }, Math.min(1000, this.limitSeconds * 250));
      this.#timers.add(timer);
    });
    try {
      return await Promise.race([Promise.resolve().then(fn), stalled]);
    } finally {
      if (timer) {
        clearInterval(timer);
        this.#timers.delete(timer);
      }
    }
  }

  dispose(): void {
    for (const t of this.#timers) clearInterval(t);
    this.#timers.clear();
  }
}
