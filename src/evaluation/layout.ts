/** Where things go inside an eval output directory. */
import { join } from "node:path";

/** `<output_dir>/<tag>/seed_<seed>`: one folder per episode. */
export function episodeDir(outputDir: string, tag: string, seed: number): string {
  return join(outputDir, tag, `seed_${seed}`);
}

/** The run's config as checked (paths absolute, secrets redacted). */
export function configCopyPath(outputDir: string): string {
  return join(outputDir, "config.yaml");
}

export function summaryPath(outputDir: string): string {
  return join(outputDir, "summary.json");
}

/** Image file name for observation `turn` (0 = the initial observation), image `i`. */
export function observationImageName(turn: number, i: number): string {
  return `images/obs_${String(turn).padStart(2, "0")}_${i}.png`;
}
