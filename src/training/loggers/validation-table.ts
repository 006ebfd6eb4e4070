/**
 * A validation pass as a W&B table (history key `val/episodes`): one row per episode,
 * the first `trainer.log_val_generations` of the pass in episode order (deterministic,
 * so two runs show the same episodes), with the env tag, seed, success, reward, turns,
 * the first observation's text and the model's replies; with `trainer.log_image.enable`
 * an `image` column too: the first observation's images tiled at most three across on
 * white (VAGEN's validation table tiles them the same way), and the first row's image
 * on its own as `val/sample_image`.
 *
 * W&B's media format (what its Python SDK writes for wandb.Table and wandb.Image):
 *   media/table/val/episodes_<step>_<sha8>.table.json  {"columns": [...], "data": [[...], ...]}
 *   media/images/val_<step>_<row>_<sha8>.png
 * and in the history row {"_type": "table-file" | "image-file", "path", "sha256",
 * "size", ...}. Text passes the secret redaction: an env may echo a token.
 */
import { createHash } from "node:crypto";
import { redactText } from "../../config/redact.ts";
import type { RGBImage } from "../../core/image.ts";
import { encodePng } from "../../core/png.ts";
import type { RolloutEpisode } from "../../rollout/index.ts";

/** A run file the history row refers to, by its path under the run's files. */
export interface MediaFile {
  name: string;
  bytes: Uint8Array;
}

export interface TableOptions {
  rows: number;
  images: boolean;
}

/** Cells are cut here: a table is for looking at, metrics.jsonl and rollouts/ keep everything. */
const MAX_CELL = 4000;

const cut = (text: string) => redactText(text.length > MAX_CELL ? `${text.slice(0, MAX_CELL)}…` : text);
const sha256 = (bytes: Uint8Array) => createHash("sha256").update(bytes).digest("hex");

/** Images tiled in rows of at most three, each in a cell as large as the largest, on white. */
export function tileImages(images: readonly RGBImage[]): RGBImage | undefined {
  if (images.length === 0) return undefined;
  if (images.length === 1) return images[0];
  const cols = Math.min(3, images.length);
  const rows = Math.ceil(images.length / cols);
  const cw = Math.max(...images.map((i) => i.width));
  const ch = Math.max(...images.map((i) => i.height));
  const width = cols * cw;
  const height = rows * ch;
  const data = new Uint8Array(width * height * 3).fill(255);
  images.forEach((img, k) => {
    const x0 = (k % cols) * cw;
    const y0 = Math.floor(k / cols) * ch;
    for (let y = 0; y < img.height; y++) {
      data.set(img.data.subarray(y * img.width * 3, (y + 1) * img.width * 3), ((y0 + y) * width + x0) * 3);
    }
  });
  return { width, height, data };
}

function imageFile(img: RGBImage, stem: string): { ref: Record<string, unknown>; file: MediaFile } {
  const bytes = encodePng(img);
  const sha = sha256(bytes);
  const name = `media/images/${stem}_${sha.slice(0, 8)}.png`;
  return { ref: { _type: "image-file", path: name, sha256: sha, size: bytes.length, format: "png", width: img.width, height: img.height }, file: { name, bytes } };
}

/** The history values (`val/episodes`, maybe `val/sample_image`) and the files they refer to. */
export function validationTable(step: number, episodes: readonly RolloutEpisode[], tags: Map<RolloutEpisode, string>, opts: TableOptions): { values: Record<string, unknown>; files: MediaFile[] } {
  const chosen = episodes.slice(0, opts.rows);
  if (chosen.length === 0) return { values: {}, files: [] };
  const files: MediaFile[] = [];
  const columns = ["step", "env", "seed", "success", "reward", "turns", "input", "output", ...(opts.images ? ["image"] : [])];
  let sample: Record<string, unknown> | undefined;
  const data = chosen.map((e, row) => {
    const r = e.record;
    const success = e.rows[0]?.success ?? r.turns.some((t) => t.info.success === true);
    const cells: unknown[] = [
      step,
      tags.get(e) ?? e.item.env,
      e.item.seed,
      success,
      Number.isFinite(r.totalReward) ? r.totalReward : null,
      r.turns.length,
      cut(r.initialObservation.text),
      cut(r.error ? `[${r.error.kind}] ${r.error.message}` : r.turns.map((t) => t.completion.text).join("\n---\n")),
    ];
    if (opts.images) {
      const tiled = tileImages(r.initialObservation.images);
      if (tiled) {
        const { ref, file } = imageFile(tiled, `val_${step}_${row}`);
        files.push(file);
        sample ??= ref;
        cells.push(ref);
      } else cells.push(null);
    }
    return cells;
  });
  const bytes = new TextEncoder().encode(JSON.stringify({ columns, data }));
  const sha = sha256(bytes);
  const name = `media/table/val/episodes_${step}_${sha.slice(0, 8)}.table.json`;
  files.push({ name, bytes });
  const values: Record<string, unknown> = { "val/episodes": { _type: "table-file", path: name, sha256: sha, size: bytes.length, ncols: columns.length, nrows: data.length } };
  if (sample) values["val/sample_image"] = sample;
  return { values, files };
}
