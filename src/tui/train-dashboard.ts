/**
 * The live dashboard of a `vagen train` run: the trainer's events go straight into the
 * store (the dashboard's events include them as they are). Ctrl-C asks whether to save a
 * checkpoint before stopping; `q` closes the view and the run goes on.
 */
import { existsSync } from "node:fs";
import type { TrainEvent, TrainEventListener } from "../training/events.ts";
import type { DashboardEvent } from "./events.ts";
import type { ImageProtocol } from "./image/index.ts";
import { startLiveDashboard } from "./live.tsx";
import { RunDirReader } from "./run-dir.ts";
import type { DashboardState } from "./state.ts";
import { DashboardStore } from "./store.ts";
import { summaryText } from "./summary-text.ts";

export interface TrainDashboardOptions {
  protocol: ImageProtocol;
  /** The run's output directory: after each step the viewer picks up its new rollouts. */
  outputDir: string;
  /** Ctrl-C, then `s`: save a checkpoint, then stop. */
  onSaveAndStop: () => void;
  /** Ctrl-C, then `x`: stop without saving. */
  onStop: () => void;
  /** `q`: the view is gone; the command goes on with its plain output. */
  onQuit: () => void;
}

export interface TrainDashboard {
  onEvent: TrainEventListener;
  close(): Promise<void>;
  /** What the dashboard showed, as text: printed after it closes, so the terminal keeps a record. */
  summary(): string;
}

/**
 * Removal events for the checkpoints the state lists whose folders are gone: the trainer
 * prunes to `keep_checkpoints` right after it saves, without an event of its own, so the
 * view (and the summary printed after the run) must not go on listing them.
 */
export function removedCheckpoints(state: DashboardState, exists: (path: string) => boolean = existsSync): DashboardEvent[] {
  return state.checkpoints.filter((c) => !exists(c.path)).map((c) => ({ type: "checkpoint_removed", path: c.path }));
}

export function startTrainDashboard(options: TrainDashboardOptions): TrainDashboard {
  const store = new DashboardStore();
  // Until run_started (the model is loaded first) the view says what it waits for.
  store.dispatch({ type: "starting", kind: "train", message: "starting: loading the model and setting up the run" });
  const live = startLiveDashboard({
    store,
    title: "vagen train",
    protocol: options.protocol,
    onQuit: options.onQuit,
    onInterrupt: {
      kind: "ask",
      question: "stop training?",
      choices: [
        { key: "s", label: "save a checkpoint and stop", run: options.onSaveAndStop },
        { key: "x", label: "stop without saving", run: options.onStop },
      ],
    },
  });
  // Episodes reach the viewer from the rollout folders the trainer writes (the events
  // carry outcomes, not transcripts); everything else comes from the events themselves.
  let reader: RunDirReader | undefined;
  const loadRollouts = () => {
    try {
      if (!reader || reader.kind === "unknown") reader = new RunDirReader(options.outputDir);
    } catch {
      return; // no output directory yet
    }
    for (const event of reader.poll()) if (event.type === "episode_loaded") store.dispatch(event);
  };
  const forgetPruned = () => {
    for (const removed of removedCheckpoints(store.getState())) store.dispatch(removed);
  };
  const onEvent = (event: TrainEvent) => {
    store.dispatch(event);
    if (event.type === "checkpoint_saved") forgetPruned();
    if (event.type === "step_finished" || event.type === "run_finished") loadRollouts();
  };
  const summary = () => {
    forgetPruned();
    return summaryText(store.getState());
  };
  return { onEvent, close: () => live.close(), summary };
}
