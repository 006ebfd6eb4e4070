/**
 * The live dashboard of a `vagen eval` run: a store fed by the runner's events, mounted
 * full-screen. `q` closes the view (the command goes on with plain lines); Ctrl-C goes
 * to the command's own interrupt handling.
 */
import type { EvalEventListener } from "../evaluation/events.ts";
import { type PlannedEpisodeDir, evalEventAdapter } from "./eval-adapter.ts";
import type { ImageProtocol } from "./image/index.ts";
import { startLiveDashboard } from "./live.tsx";
import { DashboardStore } from "./store.ts";

export interface EvalDashboardOptions {
  episodes: PlannedEpisodeDir[];
  protocol: ImageProtocol;
  onInterrupt: () => void;
  onQuit: () => void;
}

export interface EvalDashboard {
  onEvent: EvalEventListener;
  /** Leave the dashboard (idempotent); the terminal is back to normal when it resolves. */
  close(): Promise<void>;
}

export function startEvalDashboard(options: EvalDashboardOptions): EvalDashboard {
  const store = new DashboardStore();
  // Until the runner's first event (after the model has loaded) the view says what it waits for.
  store.dispatch({ type: "starting", kind: "eval", message: `starting: setting up the model and the envs for ${options.episodes.length} episode(s)` });
  const live = startLiveDashboard({
    store,
    title: "vagen eval",
    protocol: options.protocol,
    onQuit: options.onQuit,
    onInterrupt: { kind: "now", run: options.onInterrupt },
  });
  return { onEvent: evalEventAdapter(store.dispatch, options.episodes), close: () => live.close() };
}
