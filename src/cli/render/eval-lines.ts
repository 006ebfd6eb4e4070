/**
 * The plain views of a `vagen eval` run, drawn from its events (src/evaluation/events.ts):
 * log lines (CI logs, files, pipes) and a one-line bar redrawn with \r on a terminal.
 * Both write to a stream (stderr by default) so stdout carries only the summary table,
 * and every line passes the secret redaction.
 */
import { redactText } from "../../config/index.ts";
import type { EpisodeFinishedEvent, EvalEvent, EvalEventListener, EvalProgress } from "../../evaluation/events.ts";
import type { Writable } from "./writable.ts";

/** `out`, with secrets removed from what is written to it. */
function redacting(out: Writable): Writable {
  return { write: (text: string) => out.write(redactText(text)) };
}

/** How an episode ended, in one word: success, fail, or the kind of error. */
function outcome(event: EpisodeFinishedEvent): string {
  const { finishReason } = event;
  if (finishReason === "model_error" || finishReason === "env_error" || finishReason === "error") return finishReason;
  return event.success ? "success" : "fail";
}

/** The first 200 characters of an episode's error message: enough to act on, short enough for one line. */
const errorHead = (event: EpisodeFinishedEvent) => event.error?.message.slice(0, 200);

/**
 * One line per episode as it finishes, plus the run's start and any warning:
 *
 *   eval: 6 episode(s), 2 already finished (resume)
 *   [3/6] sokoban seed 102: success, reward 1.100, 2 turn(s)
 */
export function evalLogRenderer(out: Writable = process.stderr): EvalEventListener {
  const say = redacting(out);
  return (event: EvalEvent) => {
    switch (event.type) {
      case "run_started": {
        const { total, done: skipped } = event.progress;
        say.write(`eval: ${total} episode(s)${skipped ? `, ${skipped} already finished (resume)` : ""}\n`);
        return;
      }
      case "episode_finished": {
        const { done, total } = event.progress;
        const error = event.error ? ` (${errorHead(event)})` : "";
        say.write(`[${done}/${total}] ${event.tag} seed ${event.seed}: ${outcome(event)}, reward ${event.reward.toFixed(3)}, ${event.turns} turn(s)${error}\n`);
        return;
      }
      case "warning":
        say.write(`${event.message}\n`);
        return;
      // Turns, env summaries and the end are left to the summary table the command prints.
      case "episode_started":
      case "turn_finished":
      case "env_summary":
      case "run_finished":
        return;
    }
  };
}

/**
 * One status line redrawn in place, with errors and notices printed above it:
 *
 *   eval [###############---------------] 3/6  running 2  success 3  errors 0  retries 1
 *
 * Retry warnings only count (one per line would push the bar off the screen); other
 * warnings are printed.
 */
export function evalBarRenderer(out: Writable = process.stderr, width = 30): EvalEventListener {
  const say = redacting(out);
  let last: EvalProgress = { done: 0, total: 0, running: 0, successes: 0, errors: 0 };
  let retries = 0;
  const draw = () => {
    const { done, total, running, successes, errors } = last;
    const filled = total === 0 ? width : Math.round((done / total) * width);
    const bar = "#".repeat(filled) + "-".repeat(width - filled);
    const retried = retries ? `  retries ${retries}` : "";
    say.write(`\r\x1b[2Keval [${bar}] ${done}/${total}  running ${running}  success ${successes}  errors ${errors}${retried}`);
  };
  /** A line above the bar: clear the bar's line, print, redraw the bar below. */
  const note = (message: string) => {
    say.write(`\r\x1b[2K${message}\n`);
    draw();
  };
  return (event: EvalEvent) => {
    switch (event.type) {
      case "run_started":
        last = { ...event.progress };
        if (event.progress.done) say.write(`resume: ${event.progress.done} episode(s) already finished\n`);
        draw();
        return;
      case "episode_started":
        last = event.progress;
        draw();
        return;
      case "episode_finished":
        last = event.progress;
        if (event.error) note(`${event.tag} seed ${event.seed}: ${event.finishReason}: ${errorHead(event)}`);
        draw();
        return;
      case "warning":
        if (event.code === "retry") {
          retries++;
          draw();
        } else {
          note(event.message);
        }
        return;
      case "run_finished":
        last = event.progress;
        draw();
        say.write("\n");
        return;
      case "turn_finished":
      case "env_summary":
        return;
    }
  };
}
