/**
 * The run's folder under `<output_dir>/wandb/`, laid out as W&B's SDK lays it out, so
 * `wandb sync <folder>` uploads it later:
 *
 *   offline-run-YYYYMMDD_HHMMSS-<id>/   (WANDB_MODE=offline; `run-...` when online)
 *     run-<id>.wandb            every record of the run (wandb-records.ts)
 *     files/config.yaml         the config, W&B's shape ({key: {value: ...}})
 *     files/wandb-summary.json  the last value of each metric (written at the end)
 *     files/media/...           validation tables and images the history refers to
 *
 * An online run writes the same folder beside what it streams, as W&B's SDK does: when
 * the server was away for longer than the run could hold rows, `wandb sync` of this
 * folder brings them in. Each run segment (a resumed run) gets a folder of its own with
 * the same run id and `resumed` set; sync them in order.
 *
 * Appends are synchronous and small (one record a step): a killed run leaves every
 * finished step readable.
 */
import { appendFileSync, existsSync, mkdirSync, writeFileSync } from "node:fs";
import { hostname } from "node:os";
import { dirname, join } from "node:path";
import YAML from "yaml";
import { exitBody, fileHeader, filesBody, frame, historyBody, record, runBody, updatesBody } from "./wandb-records.ts";

export interface LocalRunOptions {
  root: string;
  mode: "online" | "offline";
  id: string;
  project: string;
  entity?: string;
  displayName: string;
  /** W&B's config shape: top-level key -> {value: ...}. */
  config: Record<string, { value: unknown }>;
  resumed: boolean;
  startTimeMs?: number;
}

/** YYYYMMDD_HHMMSS in UTC, W&B's folder stamp. */
export function folderStamp(ms: number): string {
  const d = new Date(ms);
  const p = (n: number) => String(n).padStart(2, "0");
  return `${d.getUTCFullYear()}${p(d.getUTCMonth() + 1)}${p(d.getUTCDate())}_${p(d.getUTCHours())}${p(d.getUTCMinutes())}${p(d.getUTCSeconds())}`;
}

export class LocalRun {
  readonly dir: string;
  readonly file: string;
  #position = 0;
  #num = 0;
  readonly #start: number;

  constructor(opts: LocalRunOptions) {
    this.#start = opts.startTimeMs ?? Date.now();
    // A resumed segment that starts within the second of the last one would share its
    // folder (and append to its run file): it takes the next free second's stamp instead.
    const folder = (ms: number) => join(opts.root, `${opts.mode === "offline" ? "offline-run" : "run"}-${folderStamp(ms)}-${opts.id}`);
    let stampMs = this.#start;
    while (existsSync(folder(stampMs))) stampMs += 1000;
    this.dir = folder(stampMs);
    this.file = join(this.dir, `run-${opts.id}.wandb`);
    mkdirSync(join(this.dir, "files"), { recursive: true });
    writeFileSync(join(this.dir, "files", "config.yaml"), YAML.stringify(opts.config));
    const header = fileHeader();
    writeFileSync(this.file, header);
    this.#position = header.length;
    this.#append("header", historyless());
    const config = Object.fromEntries(Object.entries(opts.config).map(([k, v]) => [k, JSON.stringify(v.value)]));
    this.#append("run", runBody({ id: opts.id, entity: opts.entity, project: opts.project, displayName: opts.displayName, host: hostname(), config, startTimeMs: this.#start, resumed: opts.resumed }));
  }

  #append(kind: Parameters<typeof record>[1], body: Parameters<typeof record>[2]): void {
    const bytes = frame(record(++this.#num, kind, body), this.#position);
    appendFileSync(this.file, bytes);
    this.#position += bytes.length;
  }

  /** One history row: each key's value as JSON (W&B's value_json), and the step. */
  history(values: Record<string, string>, step: number): void {
    this.#append("history", historyBody(values, step));
  }

  /** A media file under files/, announced with a FilesRecord so sync uploads it. */
  media(name: string, bytes: Uint8Array): void {
    const path = join(this.dir, "files", name);
    mkdirSync(dirname(path), { recursive: true });
    writeFileSync(path, bytes);
    this.#append("files", filesBody([name]));
  }

  /** The summary, the exit record and the final record; the folder is complete. */
  finish(summary: Record<string, string>, summaryJson: string, exitCode: number): void {
    this.#append("summary", updatesBody(summary));
    writeFileSync(join(this.dir, "files", "wandb-summary.json"), summaryJson);
    this.#append("exit", exitBody(exitCode, (Date.now() - this.#start) / 1000));
    this.#append("final", historyless());
  }
}

/** An empty message body (HeaderRecord, FinalRecord carry nothing vagen fills in). */
function historyless() {
  return updatesBody({});
}
