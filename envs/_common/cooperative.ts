/**
 * Long CPU work (level generation, solvers) written once as a generator that yields
 * between small units of work, then run either straight through (tests, tools) or in
 * slices that hand the event loop back in between, so an env server keeps answering
 * other clients and a command keeps reacting to Ctrl-C while a level is being built.
 *
 * Yield points never change what the work computes: the same seed gives the same level
 * whichever way it is run.
 */

/** Work that yields (nothing) between units and returns a `T`. */
export type Work<T> = Generator<void, T, void>;

/** Runs `work` to the end without ever giving the event loop back. */
export function finishNow<T>(work: Work<T>): T {
  for (;;) {
    const step = work.next();
    if (step.done) return step.value;
  }
}

export interface CooperativeOptions {
  /** Milliseconds of work between two returns to the event loop (default 10). */
  sliceMs?: number;
  /** Stops the work at the next yield point, rejecting with the signal's reason. */
  signal?: AbortSignal;
}

/**
 * Runs `work` in slices of about `sliceMs`, returning to the event loop between slices
 * (a macrotask, so timers, sockets and signal handlers all get their turn).
 */
export async function finishCooperatively<T>(work: Work<T>, options: CooperativeOptions = {}): Promise<T> {
  const sliceMs = options.sliceMs ?? 10;
  for (;;) {
    options.signal?.throwIfAborted();
    const sliceEnd = performance.now() + sliceMs;
    do {
      const step = work.next();
      if (step.done) return step.value;
    } while (performance.now() < sliceEnd);
    await nextMacrotask();
  }
}

function nextMacrotask(): Promise<void> {
  return new Promise((resolve) => setImmediate(resolve));
}
