/**
 * A training run as a W&B run: the config at the start, one history row per step (the
 * step's metrics exactly as metrics.jsonl has them, with `_step` the trainer's step),
 * the validation table merged into its step's row, the summary and the exit code at the
 * end.
 *
 * Online, rows stream in the background (wandb-stream.ts) and the same records go to the
 * local run folder (wandb-local.ts); offline (WANDB_MODE=offline) only the folder is
 * written, for a later `wandb sync`.
 *
 * Resume: `<output_dir>/wandb/run.json` keeps the run's id, where its history stands
 * (lines the server holds) and the last step it holds. A resumed training run reuses
 * the id, so W&B shows one run; steps the W&B run already has (an interrupted segment
 * got further than its last checkpoint) are not sent again, since W&B's steps only go
 * forward. A run that starts afresh in the folder starts a new W&B run.
 */
import { existsSync, readFileSync } from "node:fs";
import { hostname } from "node:os";
import { join } from "node:path";
import { redactSecrets } from "../../config/redact.ts";
import { writeFileAtomic } from "../../evaluation/outputs.ts";
import type { TrainEvent } from "../events.ts";
import { TRAIN_WRITE_HINT } from "../outputs.ts";
import type { RetryPolicy } from "./retry.ts";
import type { LoggerPlan, WandbSettings } from "./settings.ts";
import type { MediaFile } from "./validation-table.ts";
import { WandbApi } from "./wandb-api.ts";
import { LocalRun } from "./wandb-local.ts";
import { WandbStream } from "./wandb-stream.ts";

/** What run.json holds between run segments. */
export interface WandbRunState {
  id: string;
  project: string;
  entity?: string;
  mode: "online" | "offline";
  /** History lines the server holds (online). */
  historyOffset: number;
  /** The last step the W&B run holds (online: acknowledged; offline: written). */
  lastStep: number;
}

/** W&B's run ids: 8 characters of [a-z0-9]. */
export function newRunId(random: () => number = Math.random): string {
  const alphabet = "abcdefghijklmnopqrstuvwxyz0123456789";
  return Array.from({ length: 8 }, () => alphabet[Math.floor(random() * alphabet.length)]).join("");
}

export function readRunState(path: string): WandbRunState | undefined {
  if (!existsSync(path)) return undefined;
  try {
    const s = JSON.parse(readFileSync(path, "utf8")) as Partial<WandbRunState>;
    if (typeof s.id !== "string" || !/^[\w-]+$/.test(s.id)) return undefined;
    return { id: s.id, project: String(s.project ?? ""), entity: s.entity, mode: s.mode === "offline" ? "offline" : "online", historyOffset: Number(s.historyOffset) || 0, lastStep: Number.isFinite(s.lastStep) ? Number(s.lastStep) : -1 };
  } catch {
    return undefined;
  }
}

/** JSON with W&B's spelling of non-finite numbers (NaN, Infinity), which JSON.stringify would turn into null. */
export function wandbJson(value: unknown): string {
  const marks: string[] = [];
  const text = JSON.stringify(value, (_k, v) => {
    if (typeof v === "number" && !Number.isFinite(v)) {
      marks.push(Number.isNaN(v) ? "NaN" : v > 0 ? "Infinity" : "-Infinity");
      return `\u0000nonfinite${marks.length - 1}\u0000`;
    }
    return v;
  });
  return text.replace(/"\\u0000nonfinite(\d+)\\u0000"/g, (_m, i: string) => marks[Number(i)]!);
}

/** W&B's config shape: each top-level key's value under `value`, secrets redacted. */
export function wandbConfig(config: unknown): Record<string, { value: unknown }> {
  const clean = redactSecrets(config) as Record<string, unknown>;
  return Object.fromEntries(Object.entries(clean).map(([k, v]) => [k, { value: v }]));
}

export interface WandbContext {
  resumed: boolean;
  emit: (e: TrainEvent) => void;
  retry?: RetryPolicy;
}

export class WandbLogger {
  readonly statePath: string;
  readonly local: LocalRun;
  readonly stream: WandbStream | undefined;
  readonly state: WandbRunState;
  readonly #start = Date.now();
  readonly #emit: (e: TrainEvent) => void;
  /** Steps up to here are already in the W&B run (an earlier segment sent them). */
  readonly #skipThrough: number;
  #skipped = 0;
  #pendingValues = new Map<number, Record<string, unknown>>();
  #summary: Record<string, unknown> = {};
  #warned = new Set<string>();
  #closed = false;

  constructor(
    private readonly settings: WandbSettings,
    plan: LoggerPlan,
    ctx: WandbContext,
  ) {
    this.#emit = ctx.emit;
    const root = join(plan.outputDir, "wandb");
    this.statePath = join(root, "run.json");
    const previous = ctx.resumed ? readRunState(this.statePath) : undefined;
    // Same project: the same run. A mode switch (offline segment, then online) keeps the id, but
    // the server holds none of the offline rows, so history starts over (the offline folder syncs them).
    const same = previous !== undefined && previous.project === settings.project;
    const sameMode = same && previous.mode === settings.mode;
    this.state = same
      ? { ...previous, mode: settings.mode, ...(sameMode ? {} : { historyOffset: 0, lastStep: -1 }) }
      : { id: newRunId(), project: settings.project, entity: settings.entity, mode: settings.mode, historyOffset: 0, lastStep: -1 };
    this.#skipThrough = sameMode ? this.state.lastStep : -1;
    const config = wandbConfig(plan.config);
    this.local = new LocalRun({ root, mode: settings.mode, id: this.state.id, project: settings.project, entity: this.state.entity, displayName: settings.name, config, resumed: same });
    this.#saveState();
    if (settings.mode === "online") {
      const api = new WandbApi(settings.baseUrl, settings.apiKey!);
      this.stream = new WandbStream(
        api,
        { id: this.state.id, project: settings.project, entity: this.state.entity ?? settings.entity, displayName: settings.name, config: JSON.stringify(config), host: hostname() },
        {
          retry: ctx.retry,
          startOffset: this.state.historyOffset,
          onTrouble: (kind, message) => this.#warnOnce(`wandb_${kind}`, message),
          onProgress: (offset, lastStep) => {
            this.state.historyOffset = offset;
            this.state.lastStep = Math.max(this.state.lastStep, lastStep);
            if (this.stream?.run) this.state.entity = this.stream.run.entity;
            this.#saveState();
          },
        },
      );
    }
  }

  #warnOnce(code: string, message: string): void {
    if (this.#warned.has(code)) return;
    this.#warned.add(code);
    this.#emit({ type: "warning", step: this.state.lastStep < 0 ? 0 : this.state.lastStep, code, message });
  }

  #saveState(): void {
    writeFileAtomic(this.statePath, `${JSON.stringify(this.state, null, 2)}\n`, TRAIN_WRITE_HINT);
  }

  /** Media and values of a validation, sent with the step's scalars (one W&B row per step). */
  validation(step: number, values: Record<string, unknown>, files: readonly MediaFile[]): void {
    if (step <= this.#skipThrough) return;
    for (const f of files) {
      this.local.media(f.name, f.bytes);
      this.stream?.file(f.name, f.bytes);
    }
    this.#pendingValues.set(step, { ...this.#pendingValues.get(step), ...values });
  }

  scalars(step: number, metrics: Record<string, number>): void {
    if (this.#closed) return;
    const extra = this.#pendingValues.get(step) ?? {};
    this.#pendingValues.delete(step);
    if (step <= this.#skipThrough) {
      if (this.#skipped++ === 0) {
        this.#warnOnce("wandb_steps_kept", `the W&B run ${this.state.id} already holds steps up to ${this.#skipThrough} from the interrupted segment; steps ${step}..${this.#skipThrough} of this segment go to metrics.jsonl and TensorBoard only`);
      }
      return;
    }
    const now = Date.now();
    const row: Record<string, unknown> = { ...metrics, ...extra, _step: step, _runtime: (now - this.#start) / 1000, _timestamp: now / 1000 };
    Object.assign(this.#summary, row);
    this.local.history(Object.fromEntries(Object.entries(row).map(([k, v]) => [k, wandbJson(v)])), step);
    if (this.stream) {
      this.stream.summary(wandbJson(this.#summary));
      this.stream.log(wandbJson(row), step);
    } else {
      this.state.lastStep = step;
      this.#saveState();
    }
  }

  /** Health of the stream, logged with the step's metrics (online only). */
  metrics(): Record<string, number> {
    if (!this.stream) return {};
    return { "logger/wandb_pending_rows": this.stream.pending, "logger/wandb_dropped_rows": this.stream.dropped };
  }

  async close(exitCode: number, timeoutMs: number): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    this.local.finish(Object.fromEntries(Object.entries(this.#summary).map(([k, v]) => [k, wandbJson(v)])), wandbJson(this.#summary), exitCode);
    if (!this.stream) return;
    const ok = await this.stream.finish(exitCode, timeoutMs);
    if (!ok || this.stream.dropped > 0) {
      this.#emit({
        type: "warning",
        step: this.state.lastStep < 0 ? 0 : this.state.lastStep,
        code: "wandb_incomplete",
        message: `W&B did not receive the whole run (${this.stream.dropped} history row(s) dropped or unsent after waiting ${Math.round(timeoutMs / 1000)} s); metrics.jsonl and ${this.local.dir} hold everything: \`wandb sync ${this.local.dir}\` uploads it`,
      });
    }
  }
}
