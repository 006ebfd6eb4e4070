/**
 * The live dashboard of a `vagen train` run: the trainer's events go straight into the
 * store (the dashboard's events include them as they are). Ctrl-C asks whether to save a
 * checkpoint before stopping; `q` closes the view and the run goes on.
 */
import type { TrainEvent, TrainEventListener } from "../training/events.ts";
import type { ImageProtocol } from "./image/index.ts";
import { startLiveDashboard } from "./live.tsx";
import { RunDirReader } from "./run-dir.ts";
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

export function startTrainDashboard(options: TrainDashboardOptions): TrainDashboard {
  const store = new DashboardStore();
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
  const onEvent = (event: TrainEvent) => {
    store.dispatch(event);
    if (event.type === "step_finished" || event.type === "run_finished") loadRollouts();
  };
  return { onEvent, close: () => live.close(), summary: () => summaryText(store.getState()) };
}
