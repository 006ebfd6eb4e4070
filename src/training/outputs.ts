/**
 * What a run writes besides checkpoints: the resolved config, metrics.jsonl, a few
 * episodes per step under rollouts/, and (trainer.dump_batches) every training row with
 * the columns the estimator read and wrote, so anyone can check the algorithms against
 * their own implementation.
 *
 * Every write that fails (a full disk, a read-only folder) throws an `OutputWriteError`
 * naming the path it was writing, with `TRAIN_WRITE_HINT`.
 */
import { appendFileSync, existsSync, mkdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import YAML from "yaml";
import { redactSecrets, redactText } from "../config/index.ts";
import { episodeMetrics, type EpisodeMetrics } from "../evaluation/episode-metrics.ts";
import { writeEpisode, writeFileAtomic } from "../evaluation/outputs.ts";
import { guardWrite } from "../evaluation/write-error.ts";
import type { DropReason, RolloutEpisode } from "../rollout/index.ts";
import type { TrainingRow } from "../rollout/types.ts";
import type { TrainConfig } from "./config.ts";

/** What to do about a failed write of a training run's outputs. */
export const TRAIN_WRITE_HINT = "free disk space, or change trainer.output_dir";

/** The run's config, secrets redacted, as `dir/name` (config.yaml; config-history/from_step_N.yaml for each run segment). */
export function writeResolvedConfig(dir: string, config: TrainConfig, name = "config.yaml"): void {
  guardWrite(dir, TRAIN_WRITE_HINT, () => mkdirSync(dir, { recursive: true }));
  writeFileAtomic(join(dir, name), YAML.stringify(redactSecrets(config)), TRAIN_WRITE_HINT);
}

/**
 * metrics.jsonl: one object per step. A resumed run first drops the lines of steps after
 * the checkpoint it resumes from, so the file reads as if the run had never stopped; a
 * run that starts afresh (`resumeStep` undefined) starts the file afresh too, so an
 * earlier run's lines in the same folder never mix with its own.
 */
export class MetricsLog {
  readonly path: string;

  constructor(dir: string, resumeStep: number | undefined) {
    this.path = join(dir, "metrics.jsonl");
    if (resumeStep === undefined) writeFileAtomic(this.path, "", TRAIN_WRITE_HINT);
    else if (existsSync(this.path)) {
      const kept = readFileSync(this.path, "utf8")
        .split("\n")
        .filter((line) => line.trim() !== "" && (JSON.parse(line) as { step: number }).step <= resumeStep);
      writeFileAtomic(this.path, kept.map((l) => `${l}\n`).join(""), TRAIN_WRITE_HINT);
    }
  }

  append(step: number, metrics: Record<string, number>): void {
    guardWrite(this.path, TRAIN_WRITE_HINT, () => appendFileSync(this.path, `${JSON.stringify({ step, ...metrics })}\n`));
  }
}

/** A dumped training episode's metrics.json: eval's, plus why the trainer dropped it. */
export interface DumpedEpisodeMetrics extends EpisodeMetrics {
  /** Set when the episode gave no training rows (its `error` says why, for env and model errors). */
  dropped?: DropReason;
}

export interface DumpContext {
  tags: Map<RolloutEpisode, string>;
  model: string;
  maxTurns: (tag: string) => number;
}

/**
 * Episodes of a step, as `vagen eval` writes episodes, under `dir` as
 * `<NNN>_<tag>_seed<S>_traj<T>/`. `select: "first"` (the default) writes the first
 * `count` of the step, kept or dropped; `"dropped"` the first `count` of those dropped,
 * for a step that gave no rows at all and stops the run, so the episodes' own errors
 * are on disk. A dropped episode's metrics.json has `dropped` (the reason) beside its
 * `error` (the env's or model's message); `NNN` is the episode's index in the step.
 */
export function dumpEpisodes(dir: string, episodes: readonly RolloutEpisode[], count: number, ctx: DumpContext, select: "first" | "dropped" = "first"): void {
  const indexed = episodes.map((episode, index) => ({ episode, index }));
  const chosen = (select === "dropped" ? indexed.filter(({ episode }) => episode.dropped !== undefined) : indexed).slice(0, count);
  for (const { episode, index } of chosen) {
    const tag = ctx.tags.get(episode) ?? episode.item.env;
    const metrics: DumpedEpisodeMetrics = {
      ...episodeMetrics(episode.record, { envName: episode.item.env, tag, model: ctx.model, maxTurns: ctx.maxTurns(tag), envConfig: episode.item.config ?? {} }),
      ...(episode.dropped !== undefined ? { dropped: episode.dropped } : {}),
    };
    writeEpisode(join(dir, `${String(index).padStart(3, "0")}_${tag}_seed${episode.item.seed}_traj${episode.trajIndex}`), metrics, episode.record, TRAIN_WRITE_HINT);
  }
}

/** A step's dropped episodes: how many per reason, and the first error message of each. */
export interface DroppedSummary {
  counts: Partial<Record<DropReason, number>>;
  /** The first message per reason, where the episode carries one (env and model errors do). */
  firstErrors: Partial<Record<DropReason, string>>;
}

/**
 * Why a step's episodes were dropped, with the first error of each kind, so a step that
 * fails for want of rows can say what the env said ("env_error: 3 (first: ...)"),
 * not only how many.
 */
export function droppedSummary(episodes: readonly RolloutEpisode[]): DroppedSummary {
  const summary: DroppedSummary = { counts: {}, firstErrors: {} };
  for (const episode of episodes) {
    const reason = episode.dropped;
    if (reason === undefined) continue;
    summary.counts[reason] = (summary.counts[reason] ?? 0) + 1;
    const message = episode.record.error?.message;
    if (message !== undefined && summary.firstErrors[reason] === undefined) summary.firstErrors[reason] = message;
  }
  return summary;
}

/**
 * The summary in one line for an error message: `env_error: 3 (first: connection
 * refused), context_too_large: 1`; each message cut to `maxMessage` characters and
 * passed through the secret redaction (an env server's error may echo a token).
 */
export function formatDropped(summary: DroppedSummary, maxMessage = 300): string {
  return (Object.entries(summary.counts) as [DropReason, number][])
    .map(([reason, n]) => {
      const first = summary.firstErrors[reason];
      if (first === undefined) return `${reason}: ${n}`;
      const cut = redactText(first.length > maxMessage ? `${first.slice(0, maxMessage)}...` : first);
      return `${reason}: ${n} (first: ${cut})`;
    })
    .join(", ");
}

/** The columns of one dumped row (per response token unless noted). */
export interface DumpColumns {
  tokenRewards: ArrayLike<number>[];
  values?: ArrayLike<number>[];
  oldLogprobs: ArrayLike<number>[];
  refLogprobs?: ArrayLike<number>[];
  advantages: ArrayLike<number>[];
  returns: ArrayLike<number>[];
}

/** batches/step_<N>.jsonl: a meta line (estimator and its parameters), then one line per row. */
export function dumpBatch(dir: string, step: number, meta: Record<string, unknown>, rows: readonly TrainingRow[], cols: DumpColumns): void {
  guardWrite(dir, TRAIN_WRITE_HINT, () => mkdirSync(dir, { recursive: true }));
  const list = (a: ArrayLike<number> | undefined) => (a ? Array.from(a) : undefined);
  const lines = [JSON.stringify({ meta })];
  rows.forEach((row, b) => {
    lines.push(
      JSON.stringify({
        uid: row.uid,
        episode: row.episodeId,
        traj: row.trajIndex,
        turn: row.turnIndex,
        prompt_ids: row.promptIds,
        response_ids: row.responseIds,
        response_mask: row.responseMask,
        token_rewards: list(cols.tokenRewards[b]),
        values: list(cols.values?.[b]),
        old_logprobs: list(cols.oldLogprobs[b]),
        rollout_logprobs: row.rolloutLogprobs,
        ref_logprobs: list(cols.refLogprobs?.[b]),
        advantages: list(cols.advantages[b]),
        returns: list(cols.returns[b]),
      }),
    );
  });
  writeFileAtomic(join(dir, `step_${step}.jsonl`), `${lines.join("\n")}\n`, TRAIN_WRITE_HINT);
}

