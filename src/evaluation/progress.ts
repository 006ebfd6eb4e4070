/**
 * Progress reporting for eval runs: a one-line bar redrawn with \r on a terminal, plain
 * log lines otherwise (CI logs, files). Both write to a stream (stderr by default) so
 * stdout carries only the summary table. Every line passes the secret redaction.
 */
import { redactText } from "../config/index.ts";
import type { EpisodeMetrics } from "./episode-metrics.ts";

export interface EvalProgress {
  /** Episodes finished in this run plus those skipped as already done. */
  done: number;
  total: number;
  running: number;
  successes: number;
  errors: number;
}

export interface EvalReporter {
  start(info: { total: number; skipped: number }): void;
  episodeDone(metrics: EpisodeMetrics, progress: EvalProgress): void;
  episodeStarted?(progress: EvalProgress): void;
  retry?(message: string): void;
  note(message: string): void;
  finish(progress: EvalProgress): void;
}

interface Writable {
  write(text: string): unknown;
}

/** `out`, with secrets removed from what is written to it. */
function redacting(out: Writable): Writable {
  return { write: (text: string) => out.write(redactText(text)) };
}

export class LogReporter implements EvalReporter {
  private readonly out: Writable;

  constructor(out: Writable = process.stderr) {
    this.out = redacting(out);
  }

  start({ total, skipped }: { total: number; skipped: number }): void {
    this.out.write(`eval: ${total} episode(s)${skipped ? `, ${skipped} already finished (resume)` : ""}\n`);
  }

  episodeDone(m: EpisodeMetrics, p: EvalProgress): void {
    const outcome = m.finish_reason === "model_error" || m.finish_reason === "env_error" || m.finish_reason === "error" ? m.finish_reason : m.success ? "success" : "fail";
    const error = m.error ? ` (${m.error.message.slice(0, 200)})` : "";
    this.out.write(`[${p.done}/${p.total}] ${m.tag} seed ${m.seed}: ${outcome}, reward ${m.cumulative_reward.toFixed(3)}, ${m.num_turns} turn(s)${error}\n`);
  }

  retry(message: string): void {
    this.out.write(`${message}\n`);
  }

  note(message: string): void {
    this.out.write(`${message}\n`);
  }

  finish(): void {}
}

export class BarReporter implements EvalReporter {
  private last: EvalProgress = { done: 0, total: 0, running: 0, successes: 0, errors: 0 };
  private retries = 0;
  private readonly out: Writable;

  constructor(
    out: Writable = process.stderr,
    private readonly width = 30,
  ) {
    this.out = redacting(out);
  }

  start({ total, skipped }: { total: number; skipped: number }): void {
    this.last = { ...this.last, done: skipped, total };
    if (skipped) this.out.write(`resume: ${skipped} episode(s) already finished\n`);
    this.draw();
  }

  episodeStarted(p: EvalProgress): void {
    this.last = p;
    this.draw();
  }

  episodeDone(m: EpisodeMetrics, p: EvalProgress): void {
    this.last = p;
    if (m.error) this.note(`${m.tag} seed ${m.seed}: ${m.finish_reason}: ${m.error.message.slice(0, 200)}`);
    this.draw();
  }

  retry(): void {
    this.retries++;
    this.draw();
  }

  note(message: string): void {
    this.out.write(`\r\x1b[2K${message}\n`);
    this.draw();
  }

  finish(p: EvalProgress): void {
    this.last = p;
    this.draw();
    this.out.write("\n");
  }

  private draw(): void {
    const { done, total, running, successes, errors } = this.last;
    const filled = total === 0 ? this.width : Math.round((done / total) * this.width);
    const bar = "#".repeat(filled) + "-".repeat(this.width - filled);
    const retries = this.retries ? `  retries ${this.retries}` : "";
    this.out.write(`\r\x1b[2Keval [${bar}] ${done}/${total}  running ${running}  success ${successes}  errors ${errors}${retries}`);
  }
}
