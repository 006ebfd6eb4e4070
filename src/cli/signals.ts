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
