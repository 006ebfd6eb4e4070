/**
 * World-model rewards over a rollout step's episode records: the one call a rollout makes
 * between collecting episodes and cutting them into rows.
 *
 * Every turn of every episode is scored in one batch (one judge round for the step),
 * each episode's scores are aggregated (`per_turn` or `episode_mean`), and each turn gets
 * what src/rollout's `rowsFromEpisode(..., turnScores)` adds on top of the env's reward:
 * one number per sampled token of the reply (each section's score at its position) and
 * the named parts (`state_estimation`, `transition_prediction`) for metrics. The records
 * are not changed. A turn whose completion has no token ids gets `undefined`: with no
 * tokens there is no position (its score still counts in the metrics).
 */
import type { EpisodeRecord } from "../harness/types.ts";
import { aggregateEpisode, episodeStateRewardMetrics, judgeMetrics, StateRewardScorer, type JudgeStats, type TurnInput, type TurnStateReward } from "./state-reward.ts";

/** end(k) per sampled token of a reply (credit.ts: `tokenEndsFromBytes` with the tokenizer's bytes, or prefix decoding). */
export type TokenEndsOf = (ids: readonly number[]) => readonly number[];

/** What one turn earned beyond the env's reward, per sampled token of its reply. */
export interface TurnScores {
  tokenRewards: number[];
  parts: Record<string, number>;
}

export interface EpisodeStateRewards {
  /** Per episode, per turn: for `rowsFromEpisode`'s `turnScores`. */
  turnScores: (TurnScores | undefined)[][];
  /** Per episode, per turn: the scores as paid (after aggregation), with their details. */
  turns: TurnStateReward[][];
  /** Per episode: `<section>_reward` sums and `format_correct_rate`. */
  metrics: Record<string, number>[];
}

export async function applyStateRewards(
  episodes: readonly EpisodeRecord[],
  scorer: StateRewardScorer,
  tokenEndsOf: TokenEndsOf,
  signal?: AbortSignal,
): Promise<EpisodeStateRewards> {
  const inputs: TurnInput[] = [];
  for (const episode of episodes) {
    episode.turns.forEach((turn, i) => {
      const ids = turn.completion.tokenIds;
      inputs.push({
        response: turn.completion.text,
        ...(ids ? { tokenEnds: tokenEndsOf(ids) } : {}),
        stateBefore: i === 0 ? episode.resetInfo.state : episode.turns[i - 1]!.info.state,
        stateAfter: turn.info.state,
      });
    });
  }
  const scored = await scorer.scoreTurns(inputs, signal);

  const result: EpisodeStateRewards = { turnScores: [], turns: [], metrics: [] };
  let next = 0;
  for (const episode of episodes) {
    const paid = aggregateEpisode(scored.slice(next, next + episode.turns.length), scorer.config.aggregation);
    next += episode.turns.length;
    result.turnScores.push(paid.map((turn, i) => turnScores(turn, episode.turns[i]!.completion.tokenIds?.length ?? 0)));
    result.turns.push(paid);
    result.metrics.push(episodeStateRewardMetrics(paid, scorer.config));
  }
  return result;
}

function turnScores(paid: TurnStateReward, tokenCount: number): TurnScores | undefined {
  if (tokenCount === 0) return undefined;
  const tokenRewards = new Array<number>(tokenCount).fill(0);
  const parts: Record<string, number> = {};
  for (const section of paid.sections) {
    parts[section.section] = section.score;
    if (section.position !== null) tokenRewards[section.position]! += section.score;
  }
  return { tokenRewards, parts };
}

/** Each metric's mean over a step's episodes (NaN values left out), for the step's log. */
export function meanEpisodeMetrics(metrics: readonly Record<string, number>[]): Record<string, number> {
  const mean: Record<string, number> = {};
  for (const key of new Set(metrics.flatMap((m) => Object.keys(m)))) {
    const values = metrics.map((m) => m[key]).filter((x): x is number => x !== undefined && !Number.isNaN(x));
    mean[key] = values.length > 0 ? values.reduce((a, b) => a + b, 0) / values.length : Number.NaN;
  }
  return mean;
}

/**
 * `applyStateRewards` in the shape of `collectRollouts`' `scoreTurns` option: per episode,
 * per turn, the scores `rowsFromEpisode` adds. `onMetrics` receives the step's metrics
 * (the episode means of `<section>_reward` and `format_correct_rate`, and the judge
 * counters) once the batch is scored, and the counters themselves, with the first
 * failure's message for a warning (`judgeTrouble(metrics, judge.firstError)`). One
 * scorer serves one env spec: a step that mixes envs with different `state_reward`
 * blocks collects each group with its own hook. Under `on_judge_error: fail` a failed
 * judge request rejects the hook's promise (and so the step) with a `JudgeFailedError`.
 */
export function stateRewardHook(
  scorer: StateRewardScorer,
  tokenEndsOf: TokenEndsOf,
  onMetrics?: (metrics: Record<string, number>, judge: JudgeStats) => void,
): (episodes: readonly EpisodeRecord[], signal?: AbortSignal) => Promise<(TurnScores | undefined)[][]> {
  return async (episodes, signal) => {
    const { turnScores, metrics } = await applyStateRewards(episodes, scorer, tokenEndsOf, signal).catch((err: unknown) => {
      // The counters of a failed round belong to it, not to the next step's.
      scorer.takeStats();
      throw err;
    });
    const judge = scorer.takeStats();
    onMetrics?.({ ...meanEpisodeMetrics(metrics), ...judgeMetrics(judge) }, judge);
    return turnScores;
  };
}
