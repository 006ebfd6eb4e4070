/**
 * Per-episode output folders: `<output_dir>/<tag>/seed_<seed>/` with messages.json,
 * transcript.md, images/obs_<TT>_<I>.png and metrics.json.
 *
 * A folder is written whole under a temporary name and renamed into place, so a folder
 * with a metrics.json is always complete, and an interrupted write leaves nothing behind
 * that looks finished. A write that fails (a full disk, a read-only folder) throws an
 * `OutputWriteError` naming the path (write-error.ts).
 */
import { existsSync, mkdirSync, readFileSync, readdirSync, renameSync, rmSync, statSync, writeFileSync } from "node:fs";
import { basename, dirname, join } from "node:path";
import type { Observation } from "../../envs/_common/types.ts";
import { pngBytes } from "../clients/image-encoding.ts";
import { redactSecrets, redactText } from "../config/index.ts";
import type { EpisodeRecord } from "../harness/types.ts";
import type { EpisodeMetrics } from "./episode-metrics.ts";
import { observationImageName } from "./layout.ts";
import { renderTranscript } from "./transcript.ts";
import { EVAL_WRITE_HINT, guardWrite } from "./write-error.ts";

/** The metrics of a finished episode, or undefined when there is none (or it is unreadable). */
export function readEpisodeMetrics(dir: string): EpisodeMetrics | undefined {
  const path = join(dir, "metrics.json");
  if (!existsSync(path)) return undefined;
  try {
    return JSON.parse(readFileSync(path, "utf8")) as EpisodeMetrics;
  } catch {
    return undefined;
  }
}

/** A message part as written to messages.json: images become references to their PNG files. */
type DumpedPart = { type: "text"; text: string } | { type: "image"; path: string };

interface DumpedMessage {
  role: string;
  content: DumpedPart[];
  /** For assistant messages: which turn, and the env's answer to it. */
  turn?: number;
  reward?: number;
  done?: boolean;
}

/**
 * The conversation as a log: system prompt, first observation, then for every turn the
 * reply and the observation that came back (also the last one, so the outcome is visible).
 */
export function dumpConversation(record: EpisodeRecord): DumpedMessage[] {
  const observationMessage = (role: string, obs: Observation, turn: number): DumpedMessage => {
    const content: DumpedPart[] = [];
    if (obs.text !== "") content.push({ type: "text", text: obs.text });
    obs.images.forEach((_, i) => content.push({ type: "image", path: observationImageName(turn, i) }));
    return { role, content };
  };
  const messages: DumpedMessage[] = [
    { role: "system", content: [{ type: "text", text: record.systemPrompt.text }] },
    observationMessage("user", record.initialObservation, 0),
  ];
  for (const t of record.turns) {
    messages.push({ role: "assistant", content: [{ type: "text", text: t.completion.text }], turn: t.index, reward: t.reward, done: t.done });
    messages.push(observationMessage("user", t.observation, t.index));
  }
  return messages;
}

/**
 * Write an episode's folder atomically. `record` is absent for episodes that never ran.
 * Every file passes the secret redaction (an env config's token, a key in an error).
 * `hint` says what to change when the write fails (the trainer names its own key).
 */
export function writeEpisode(dir: string, metrics: EpisodeMetrics, record?: EpisodeRecord, hint = EVAL_WRITE_HINT): void {
  guardWrite(dir, hint, () => writeEpisodeFolder(dir, metrics, record));
}

function writeEpisodeFolder(dir: string, metrics: EpisodeMetrics, record?: EpisodeRecord): void {
  const parent = dirname(dir);
  mkdirSync(parent, { recursive: true });
  const tmp = join(parent, `.${basename(dir)}.tmp-${process.pid}-${Math.random().toString(36).slice(2, 10)}`);
  mkdirSync(tmp, { recursive: true });
  try {
    if (record) {
      mkdirSync(join(tmp, "images"), { recursive: true });
      const observations = [record.initialObservation, ...record.turns.map((t) => t.observation)];
      observations.forEach((obs, turn) =>
        obs.images.forEach((img, i) => writeFileSync(join(tmp, observationImageName(turn, i)), pngBytes(img))),
      );
      writeFileSync(join(tmp, "messages.json"), jsonText(dumpConversation(record)));
      writeFileSync(join(tmp, "transcript.md"), redactText(renderTranscript(record, metrics)));
    }
    writeFileSync(join(tmp, "metrics.json"), jsonText(metrics));
    // An older folder here is unfinished or a failed attempt being rerun: replace it.
    rmSync(dir, { recursive: true, force: true });
    renameSync(tmp, dir);
  } catch (err) {
    removeQuietly(tmp);
    throw err;
  }
}

/** Best-effort cleanup after a failed write: its own failure must not hide the write's. */
function removeQuietly(path: string): void {
  try {
    rmSync(path, { recursive: true, force: true });
  } catch {
    // The write's error is the one worth reporting.
  }
}

/** Remove temporary folders left by a run that was killed mid-write. */
export function removeStaleTemporaries(tagDir: string): void {
  // Not a folder (a stray file in its place): nothing to clean; writing there reports it.
  if (!existsSync(tagDir) || !statSync(tagDir).isDirectory()) return;
  for (const name of readdirSync(tagDir)) {
    if (name.startsWith(".") && name.includes(".tmp-")) rmSync(join(tagDir, name), { recursive: true, force: true });
  }
}

/** Pretty JSON with secrets redacted: how every JSON output is written. */
export function jsonText(value: unknown): string {
  return `${JSON.stringify(redactSecrets(value), null, 2)}\n`;
}

/**
 * Write a file by writing a sibling temporary file and renaming it over the target; a
 * failure throws an `OutputWriteError` naming `path`, and leaves no temporary behind.
 */
export function writeFileAtomic(path: string, content: string, hint = EVAL_WRITE_HINT): void {
  const tmp = `${path}.tmp-${process.pid}-${Math.random().toString(36).slice(2, 10)}`;
  guardWrite(path, hint, () => {
    try {
      writeFileSync(tmp, content);
      renameSync(tmp, path);
    } catch (err) {
      removeQuietly(tmp);
      throw err;
    }
  });
}
