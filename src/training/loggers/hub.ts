/**
 * VAGEN's Hugging Face upload: at every checkpoint whose step is a multiple of
 * `huggingface_hub.hf_save_freq`, the checkpoint's actor is exported as a Hugging Face
 * model folder (export.ts's exportCheckpoint: the base model's config and tokenizer with
 * the trained weights) and uploaded to `repo_id` under `<project>/<experiment>/global_step_<N>/`
 * (VAGEN's layout), in the background.
 *
 * The export is written to `<output_dir>/hf_upload/global_step_<N>/`, out of the
 * checkpoint rotation's reach (VAGEN flushes its uploads before every save for that
 * reason; here a later save cannot delete what is being uploaded), and removed once the
 * Hub has it. It runs in the checkpoint phase and costs about what the checkpoint write
 * costs; the upload never blocks a step. Uploads go one at a time, each retried with
 * backoff; one that keeps failing is given up with a warning naming its folder, which
 * stays for a manual upload. The end of the run waits for pending uploads for
 * `huggingface_hub.wait_at_end_s` at most, and says so.
 *
 * Client: `@huggingface/hub` (createRepo, whoAmI, uploadFiles) with `hubUrl` from
 * HF_ENDPOINT. Files are handed over as Bun.file blobs: the library's own folder reader
 * (a Blob subclass that reads lazily) reaches Bun's fetch as an empty body.
 */
import { createRepo, uploadFiles, whoAmI } from "@huggingface/hub";
import { readdirSync, rmSync, statSync } from "node:fs";
import { join, relative } from "node:path";
import { redactText } from "../../config/redact.ts";
import { exportCheckpoint } from "../export.ts";
import type { TrainEvent } from "../events.ts";
import { backoffMs, DEFAULT_RETRY, isRetriableStatus, Waker, within, type RetryPolicy } from "./retry.ts";
import type { HubSettings } from "./settings.ts";

interface Upload {
  step: number;
  dir: string;
  attempts: number;
}

export interface HubContext {
  outputDir: string;
  modelDir: string;
  emit: (e: TrainEvent) => void;
  retry?: RetryPolicy;
  /** Tries of one upload before it is given up. */
  maxAttempts?: number;
  /** One request's time limit (a large weight file takes a while). */
  requestTimeoutMs?: number;
}

/** Every file under `dir`, as paths relative to it (with forward slashes). */
function filesUnder(dir: string, root = dir): string[] {
  return readdirSync(dir).flatMap((name) => {
    const path = join(dir, name);
    return statSync(path).isDirectory() ? filesUnder(path, root) : [relative(root, path).split("\\").join("/")];
  });
}

function statusOf(err: unknown): number {
  const s = (err as { statusCode?: unknown }).statusCode;
  return typeof s === "number" ? s : 0;
}

export class HubUploader {
  #queue: Upload[] = [];
  #uploaded = 0;
  #failed = 0;
  #stopping = false;
  /** The end of the run stopped waiting: the loop leaves at its next turn. */
  #abandoned = false;
  #troubled = false;
  #repo: string | undefined;
  #repoReady = false;
  /** Waiting for work (not out a backoff): a new checkpoint wakes the loop only then. */
  #idle = false;
  #busy: Promise<void> = Promise.resolve();
  readonly #waker = new Waker();
  readonly #loop: Promise<void>;
  readonly #retry: RetryPolicy;
  readonly #fetch: typeof fetch;
  /** Aborted when the end of the run stops waiting, so no upload outlives the process's work. */
  readonly #cancel = new AbortController();

  constructor(
    private readonly settings: HubSettings,
    private readonly ctx: HubContext,
  ) {
    this.#retry = ctx.retry ?? DEFAULT_RETRY;
    const timeout = ctx.requestTimeoutMs ?? 15 * 60_000;
    this.#fetch = ((input: RequestInfo | URL, init?: RequestInit) => {
      const signals = [this.#cancel.signal, AbortSignal.timeout(timeout), ...(init?.signal ? [init.signal] : [])];
      return fetch(input, { ...init, signal: AbortSignal.any(signals) });
    }) as typeof fetch;
    this.#loop = this.#body();
  }

  get pending(): number {
    return this.#queue.length;
  }

  /** Called after every checkpoint; exports and queues an upload on hf_save_freq steps. */
  checkpointSaved(step: number, checkpoint: string): void {
    if (step % this.settings.every !== 0 || this.#stopping) return;
    const dir = join(this.ctx.outputDir, "hf_upload", `global_step_${step}`);
    try {
      exportCheckpoint(checkpoint, dir, { base: this.ctx.modelDir, force: true });
    } catch (err) {
      this.#failed++;
      this.#warn(step, "hub_export_failed", `could not export step ${step} for the Hub upload (${redactText((err as Error).message)}); the checkpoint ${checkpoint} is intact`);
      return;
    }
    this.#queue.push({ step, dir, attempts: 0 });
    if (this.#idle) this.#waker.wake();
  }

  metrics(): Record<string, number> {
    return { "logger/hf_pending_uploads": this.#queue.length, "logger/hf_uploaded": this.#uploaded, "logger/hf_failed_uploads": this.#failed };
  }

  #warn(step: number, code: string, message: string): void {
    this.ctx.emit({ type: "warning", step, code, message });
  }

  async #body(): Promise<void> {
    while (!this.#abandoned && !(this.#stopping && this.#queue.length === 0)) {
      const upload = this.#queue[0];
      if (!upload) {
        this.#idle = true;
        await this.#waker.sleep(60_000);
        this.#idle = false;
        continue;
      }
      const work = this.#upload(upload);
      this.#busy = work.then(() => undefined, () => undefined);
      try {
        await work;
        this.#queue.shift();
        this.#uploaded++;
        rmSync(upload.dir, { recursive: true, force: true });
        if (this.#troubled) this.#warn(upload.step, "hub_recovered", `the Hub took the upload of step ${upload.step}; ${this.#queue.length} upload(s) still queued`);
        this.#troubled = false;
      } catch (err) {
        // Cancelled by the end of the run: close() has said what is left; nothing more to report.
        if (this.#abandoned) break;
        const status = statusOf(err);
        const message = redactText((err as Error).message);
        upload.attempts++;
        if (!isRetriableStatus(status) || upload.attempts >= (this.ctx.maxAttempts ?? 8)) {
          this.#queue.shift();
          this.#failed++;
          this.#warn(upload.step, "hub_upload_failed", `gave up uploading step ${upload.step} to ${this.#repo ?? this.settings.repoId} after ${upload.attempts} tr${upload.attempts === 1 ? "y" : "ies"} (${message}); the model folder stays at ${upload.dir} for a manual upload`);
          continue;
        }
        if (!this.#troubled) this.#warn(upload.step, "hub_unreachable", `the Hub upload of step ${upload.step} failed (${message}); retrying in the background`);
        this.#troubled = true;
        await this.#waker.sleep(backoffMs(upload.attempts - 1, this.#retry));
      }
    }
  }

  async #resolveRepo(): Promise<string> {
    if (this.#repo) return this.#repo;
    const { repoId, token, endpoint } = this.settings;
    if (repoId.includes("/")) return (this.#repo = repoId);
    // VAGEN's rule: a bare name goes under the token's user.
    const me = await whoAmI({ accessToken: token, hubUrl: endpoint, fetch: this.#fetch });
    return (this.#repo = `${me.name}/${repoId}`);
  }

  async #upload(upload: Upload): Promise<void> {
    const { token, endpoint } = this.settings;
    const repo = await this.#resolveRepo();
    if (!this.#repoReady) {
      try {
        await createRepo({ repo, accessToken: token, hubUrl: endpoint, private: this.settings.private, fetch: this.#fetch });
      } catch (err) {
        if (statusOf(err) !== 409) throw err; // 409: it exists already
      }
      this.#repoReady = true;
    }
    const prefix = `${this.settings.pathPrefix}/global_step_${upload.step}`;
    const files = filesUnder(upload.dir).map((rel) => ({ path: `${prefix}/${rel}`, content: Bun.file(join(upload.dir, rel)) }));
    await uploadFiles({ repo, accessToken: token, hubUrl: endpoint, files, commitTitle: `vagen: step ${upload.step} (${this.settings.pathPrefix})`, useXet: false, fetch: this.#fetch });
  }

  /** Waits up to `timeoutS` for the queued uploads, saying so; what is left keeps its folder. */
  async close(step: number, timeoutS: number): Promise<void> {
    this.#stopping = true;
    if (this.#queue.length > 0) {
      this.#warn(step, "hub_waiting", `waiting up to ${timeoutS} s for ${this.#queue.length} Hub upload(s) to finish (huggingface_hub.wait_at_end_s)`);
      this.#waker.wake();
      const done = await within(this.#loop, timeoutS * 1000);
      this.#abandoned = true;
      this.#cancel.abort();
      this.#waker.wake();
      if (!done || this.#queue.length > 0) {
        this.#warn(step, "hub_unfinished", `${this.#queue.length} Hub upload(s) did not finish in ${timeoutS} s; their model folders stay under ${join(this.ctx.outputDir, "hf_upload")} for a manual upload`);
      }
    } else {
      this.#waker.wake();
      await within(this.#busy, 1000);
    }
  }
}
