/**
 * Signals that stop a run the way Ctrl-C does: what a terminal, Slurm or Kubernetes
 * (SIGTERM) and a closed SSH session (SIGHUP) send. The exit status is the shell's for a
 * death by that signal (128 + its number), after the checkpoint is saved.
 */
export const STOP_SIGNALS = { SIGINT: 130, SIGTERM: 143, SIGHUP: 129 } as const;
export type StopSignal = keyof typeof STOP_SIGNALS;

/** Calls `handler` on each stop signal until the returned function is called. */
export function onStopSignals(handler: (signal: StopSignal) => void): () => void {
  const handlers = (Object.keys(STOP_SIGNALS) as StopSignal[]).map((signal) => [signal, () => handler(signal)] as const);
  for (const [signal, h] of handlers) process.on(signal, h);
  return () => {
    for (const [signal, h] of handlers) process.off(signal, h);
  };
}

/** What `abortOnStopSignals` leaves to its caller. */
export interface StopSignalWatch {
  /** The first stop signal received, if any. */
  readonly received: StopSignal | undefined;
  /** Acts as if `signal` had arrived (a dashboard's save-and-stop key). */
  stop(signal: StopSignal): void;
  /** Removes the handlers. */
  off(): void;
}

/**
 * The commands' two-step stop: the first stop signal calls `first` and aborts `controller`
 * (the run stops after the step in progress, saved); a second calls `again` and exits at
 * once with that signal's status (the checkpoints on disk are whole).
 */
export function abortOnStopSignals(controller: AbortController, on: { first: (signal: StopSignal) => void; again?: (signal: StopSignal) => void }): StopSignalWatch {
  let received: StopSignal | undefined;
  const stop = (signal: StopSignal) => {
    if (controller.signal.aborted) {
      on.again?.(signal);
      process.exit(STOP_SIGNALS[signal]);
    }
    received = signal;
    on.first(signal);
    controller.abort();
  };
  const off = onStopSignals(stop);
  return {
    get received() {
      return received;
    },
    stop,
    off,
  };
}

/** How a user sends `signal` again: "Ctrl-C" for SIGINT, else its name. */
export function signalKey(signal: StopSignal): string {
  return signal === "SIGINT" ? "Ctrl-C" : signal;
}
