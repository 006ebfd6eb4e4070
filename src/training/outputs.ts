/**
 * What a run writes besides checkpoints: the resolved config, metrics.jsonl, a few
 * episodes per step under rollouts/, and (trainer.dump_batches) every training row with
 * the columns the estimator read and wrote, so anyone can check the algorithms against
 * their own implementation.
 */
import { appendFileSync, existsSync, mkdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import YAML from "yaml";
import { redactSecrets } from "../config/index.ts";
import { episodeMetrics } from "../evaluation/episode-metrics.ts";
import { writeEpisode, writeFileAtomic } from "../evaluation/outputs.ts";
import type { RolloutEpisode } from "../rollout/index.ts";
import type { TrainingRow } from "../rollout/types.ts";
import type { TrainConfig } from "./config.ts";

export function writeResolvedConfig(dir: string, config: TrainConfig): void {
  mkdirSync(dir, { recursive: true });
  writeFileAtomic(join(dir, "config.yaml"), YAML.stringify(redactSecrets(config)));
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
    if (resumeStep === undefined) writeFileAtomic(this.path, "");
    else if (existsSync(this.path)) {
      const kept = readFileSync(this.path, "utf8")
        .split("\n")
        .filter((line) => line.trim() !== "" && (JSON.parse(line) as { step: number }).step <= resumeStep);
      writeFileAtomic(this.path, kept.map((l) => `${l}\n`).join(""));
    }
  }

  append(step: number, metrics: Record<string, number>): void {
    appendFileSync(this.path, `${JSON.stringify({ step, ...metrics })}\n`);
  }
}

/** The first `count` episodes of a step, as `vagen eval` writes episodes. */
export function dumpEpisodes(
  dir: string,
  episodes: readonly RolloutEpisode[],
  count: number,
  ctx: { tags: Map<RolloutEpisode, string>; model: string; maxTurns: (tag: string) => number },
): void {
  episodes.slice(0, count).forEach((episode, i) => {
    const tag = ctx.tags.get(episode) ?? episode.item.env;
    const metrics = episodeMetrics(episode.record, { envName: episode.item.env, tag, model: ctx.model, maxTurns: ctx.maxTurns(tag), envConfig: episode.item.config ?? {} });
    writeEpisode(join(dir, `${String(i).padStart(3, "0")}_${tag}_seed${episode.item.seed}_traj${episode.trajIndex}`), metrics, episode.record);
  });
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
  mkdirSync(dir, { recursive: true });
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
  writeFileAtomic(join(dir, `step_${step}.jsonl`), `${lines.join("\n")}\n`);
}

