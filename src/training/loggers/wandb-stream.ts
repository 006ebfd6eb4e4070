/**
 * The background half of an online W&B run: history lines, the summary and media files
 * wait in memory and one loop sends them, in order, as the server takes them. The
 * trainer only appends; it never waits on the network (until the end of the run, for
 * `trainer.logger_flush_s` at most).
 *
 * When the server is away (no connection, 5xx, 429) the loop keeps everything and tries
 * again with exponential backoff; the first failure is reported once (`onTrouble`),
 * and recovery is reported too. Memory is bounded: past `maxLines` pending history
 * lines the oldest are dropped and counted (`dropped`), the run's local .wandb file
 * still holds them for a later `wandb sync`. A refusal that will never work (a bad key,
 * 4xx) stops the stream: what is pending and what comes later is counted as dropped.
 */
import { backoffMs, DEFAULT_RETRY, RequestError, Waker, type RetryPolicy } from "./retry.ts";
import type { UpsertRunInput, WandbApi, WandbRunRef } from "./wandb-api.ts";

export interface StreamOptions {
  retry?: RetryPolicy;
  /** History lines kept while the server is away. */
  maxLines?: number;
  /** Media bytes kept while the server is away. */
  maxMediaBytes?: number;
  /** Where the history resumes (the lines a resumed run already sent). */
  startOffset?: number;
  /** First trouble, a give-up and a recovery, in words. */
  onTrouble?: (kind: "unreachable" | "refused" | "recovered", message: string) => void;
  /** After each acknowledged history post: how many lines the run now holds and the last step. */
  onProgress?: (offset: number, lastStep: number) => void;
}

interface PendingLine {
  line: string;
  step: number;
}

export class WandbStream {
  #run: WandbRunRef | undefined;
  #offset: number;
  #lines: PendingLine[] = [];
  #media: { name: string; bytes: Uint8Array }[] = [];
  #mediaBytes = 0;
  #uploaded: string[] = [];
  #summary: string | undefined;
  #finish: { exitCode: number } | undefined;
  #done = false;
  #dead = false;
  #troubled = false;
  /** Waiting out a backoff: new rows do not cut it short (only the end of the run does). */
  #backingOff = false;
  #dropped = 0;
  #sent = 0;
  readonly #waker = new Waker();
  readonly #loop: Promise<void>;
  readonly #retry: RetryPolicy;
  readonly #maxLines: number;
  readonly #maxMediaBytes: number;

  constructor(
    private readonly api: WandbApi,
    private readonly upsert: UpsertRunInput,
    private readonly opts: StreamOptions = {},
  ) {
    this.#retry = opts.retry ?? DEFAULT_RETRY;
    this.#maxLines = opts.maxLines ?? 10_000;
    this.#maxMediaBytes = opts.maxMediaBytes ?? 64 * 1024 * 1024;
    this.#offset = opts.startOffset ?? 0;
    this.#loop = this.#body();
  }

  /** The run as the server named it (entity filled in), once it exists. */
  get run(): WandbRunRef | undefined {
    return this.#run;
  }

  get pending(): number {
    return this.#lines.length;
  }

  get dropped(): number {
    return this.#dropped;
  }

  get sent(): number {
    return this.#sent;
  }

  log(line: string, step: number): void {
    if (this.#dead || this.#finish) {
      this.#dropped++;
      return;
    }
    this.#lines.push({ line, step });
    if (this.#lines.length > this.#maxLines) {
      this.#lines.shift();
      this.#dropped++;
    }
    if (!this.#backingOff) this.#waker.wake();
  }

  /** The run's summary (the last value of each metric), sent with the next history post. */
  summary(json: string): void {
    this.#summary = json;
  }

  /** A media file; sent before the history lines logged after it, which refer to it. */
  file(name: string, bytes: Uint8Array): void {
    if (this.#dead || this.#finish || this.#mediaBytes + bytes.length > this.#maxMediaBytes) return;
    this.#media.push({ name, bytes });
    this.#mediaBytes += bytes.length;
    if (!this.#backingOff) this.#waker.wake();
  }

  /**
   * Marks the run finished once everything pending is sent, and waits up to `timeoutMs`
   * for that. Returns true when the server has it all.
   */
  async finish(exitCode: number, timeoutMs: number): Promise<boolean> {
    this.#finish ??= { exitCode };
    this.#waker.wake();
    let timer: ReturnType<typeof setTimeout> | undefined;
    const timedOut = new Promise<"timeout">((resolve) => (timer = setTimeout(() => resolve("timeout"), timeoutMs)));
    const result = await Promise.race([this.#loop.then(() => "done" as const), timedOut]);
    clearTimeout(timer);
    if (result === "timeout") {
      // Give up: the loop ends at its next wake-up, and what it still held counts as dropped.
      this.#dead = true;
      this.api.cancel();
      this.#waker.wake();
    }
    return result === "done" && this.#done;
  }

  async #body(): Promise<void> {
    let attempt = 0;
    while (!this.#dead) {
      const work = this.#run === undefined || this.#media.length > 0 || this.#lines.length > 0 || this.#finish !== undefined;
      if (!work) {
        await this.#waker.sleep(60_000);
        continue;
      }
      try {
        if (this.#run === undefined) this.#run = await this.api.upsertRun(this.upsert);
        else if (this.#media.length > 0) {
          const m = this.#media[0]!;
          await this.api.uploadFile(this.#run, m.name, m.bytes);
          this.#media.shift();
          this.#mediaBytes -= m.bytes.length;
          this.#uploaded.push(m.name);
        } else if (this.#lines.length > 0) await this.#postHistory(this.#run);
        else {
          await this.api.fileStream(this.#run, { complete: true, exitcode: this.#finish!.exitCode });
          this.#done = true;
          return;
        }
        if (attempt > 0 && this.#troubled) this.opts.onTrouble?.("recovered", `W&B is reachable again; ${this.#lines.length} history line(s) still queued`);
        attempt = 0;
        this.#troubled = false;
      } catch (err) {
        if (this.#dead) break; // the end of the run stopped waiting and cancelled the request
        const e = err instanceof RequestError ? err : new RequestError((err as Error).message, 0, true);
        if (!e.retriable) {
          this.#dead = true;
          this.opts.onTrouble?.("refused", `W&B refused a request (${e.message}); nothing more is sent this run`);
          break;
        }
        if (!this.#troubled) this.opts.onTrouble?.("unreachable", `W&B is not answering (${e.message}); rows are kept and sent when it is back`);
        this.#troubled = true;
        this.#backingOff = true;
        await this.#waker.sleep(backoffMs(attempt++, this.#retry));
        this.#backingOff = false;
      }
    }
    // The stream gave up (a refusal, or the end of the run's wait): what it held is lost to the server.
    this.#dropped += this.#lines.length;
    this.#lines = [];
  }

  async #postHistory(run: WandbRunRef): Promise<void> {
    const batch = this.#lines.slice(0, 1000);
    const files: Record<string, { offset: number; content: string[] }> = {
      "wandb-history.jsonl": { offset: this.#offset, content: batch.map((l) => l.line) },
    };
    if (this.#summary !== undefined) files["wandb-summary.json"] = { offset: 0, content: [this.#summary] };
    const uploaded = this.#uploaded.slice();
    await this.api.fileStream(run, { files, ...(uploaded.length ? { uploaded } : {}) });
    // Only what was in this post leaves the queue: lines logged meanwhile stay.
    const posted = new Set(batch);
    this.#lines = this.#lines.filter((l) => !posted.has(l));
    this.#uploaded.splice(0, uploaded.length);
    this.#offset += batch.length;
    this.#sent += batch.length;
    this.opts.onProgress?.(this.#offset, batch[batch.length - 1]!.step);
  }
}
