/**
 * The eval runner: executes a plan (plan.ts). Every planned episode runs through its
 * env's harness against one shared client, several at once, each written to its own
 * folder as it finishes; then summary.json is rebuilt from what is on disk. What happens
 * is told through events (events.ts) to one listener; the runner never writes to a
 * terminal.
 *
 * Resume: an episode whose folder holds a metrics.json from a normal finish is skipped.
 * Abort (Ctrl-C): no new episode starts, in-flight ones are cancelled and not written,
 * and the summary covers what had finished.
 *
 * World-model judge failures are counted per episode (metrics.json's `judge`) and per
 * env (summary.json), and the first one seen in a run is told as a `judge_failures`
 * warning; under `on_judge_error: fail` the episode ends in an error instead. A write
 * that fails (a full disk) stops the run with an error naming the path.
 */
import { mkdirSync } from "node:fs";
import { join } from "node:path";
import { stringify } from "yaml";
import type { Env } from "../../envs/_common/types.ts";
import { isAbortError } from "../clients/errors.ts";
import { VagenError } from "../core/errors.ts";
import type { InferenceClient } from "../clients/types.ts";
import { redactSecrets } from "../config/index.ts";
import { createHarness } from "../harness/registry.ts";
import type { EpisodeRecord, Harness, TurnRecord } from "../harness/types.ts";
import {
  aggregateEpisode,
  episodeStateRewardMetrics,
  JudgeFailedError,
  judgeStatsOf,
  judgeTrouble,
  judgeMetrics,
  needsJudge,
  StateRewardScorer,
  withStateRewardPrompt,
} from "../rewards/index.ts";
import { type EpisodeContext, type EpisodeJudgeCounts, type EpisodeMetrics, episodeMetrics, failedEpisodeMetrics, finishedNormally, turnFormatError } from "./episode-metrics.ts";
import type { EvalEvent, EvalEventListener, EvalProgress, ParsedAction, TurnFinishedEvent, TurnReward } from "./events.ts";
import { configCopyPath, observationImageName, summaryPath } from "./layout.ts";
import { jsonText, readEpisodeMetrics, removeStaleTemporaries, writeEpisode, writeFileAtomic } from "./outputs.ts";
import { type EvalPlan, type PlannedEnv, type PlannedEpisode, planSummary } from "./plan.ts";
import { type EvalSummary, summarizeEnv } from "./summary.ts";
import { EVAL_WRITE_HINT, guardWrite, OutputWriteError } from "./write-error.ts";

/** Creates an env by registered name or by import path (resolved against `baseDir`). */
export type EnvFactory = (nameOrImportPath: string, config: Record<string, unknown>, baseDir?: string) => Promise<Env>;

export interface EvalDependencies {
  client: InferenceClient;
  createEnv: EnvFactory;
  /** The one subscription point: every event of the run, in order. */
  onEvent?: EvalEventListener;
  signal?: AbortSignal;
  /** Directory that relative harness import paths are resolved against (the config's). */
  baseDir?: string;
}

export interface EvalResult {
  summary: EvalSummary;
  /** Episodes run (and written) in this invocation. */
  ran: number;
  /** Episodes skipped because they had already finished. */
  skipped: number;
  aborted: boolean;
}

export async function runEvaluation(plan: EvalPlan, deps: EvalDependencies): Promise<EvalResult> {
  const { client, signal } = deps;
  const emit = (event: EvalEvent) => deps.onEvent?.(event);
  guardWrite(plan.outputDir, EVAL_WRITE_HINT, () => mkdirSync(plan.outputDir, { recursive: true }));
  writeFileAtomic(configCopyPath(plan.outputDir), stringify(redactSecrets(plan.config)));

  // One world-model scorer per env that has the reward on, made from its first episode's env (the state spec).
  const scorers = new Map<string, StateRewardScorer>();
  const scorerFor = (planned: PlannedEnv, env: Env): StateRewardScorer | undefined => {
    if (!planned.stateReward) return undefined;
    if (!env.stateRewardSpec) throw new VagenError(`env ${planned.name} declares no state reward spec, so envs.${planned.tag}.config.state_reward cannot be scored`);
    let scorer = scorers.get(planned.tag);
    if (!scorer) scorers.set(planned.tag, (scorer = StateRewardScorer.create(planned.stateReward, env.stateRewardSpec)));
    return scorer;
  };
  const harnesses = new Map<string, Harness>();
  for (const env of plan.envs) {
    harnesses.set(env.tag, await createHarness(env.harness.name, env.harness.options, deps.baseDir));
    removeStaleTemporaries(join(plan.outputDir, env.tag));
  }

  const progress: EvalProgress = { done: 0, total: plan.episodes.length, running: 0, successes: 0, errors: 0 };
  const skippedPerEnv = new Map<string, number>();
  const toRun: PlannedEpisode[] = [];
  for (const episode of plan.episodes) {
    const previous = plan.resume ? readEpisodeMetrics(episode.dir) : undefined;
    if (previous && finishedNormally(previous.finish_reason)) {
      progress.done++;
      if (previous.success) progress.successes++;
      skippedPerEnv.set(episode.env.tag, (skippedPerEnv.get(episode.env.tag) ?? 0) + 1);
    } else {
      toRun.push(episode);
    }
  }
  const skipped = progress.done;
  emit({
    type: "run_started",
    outputDir: plan.outputDir,
    model: client.description,
    maxConcurrentEpisodes: plan.maxConcurrentEpisodes,
    envs: planSummary(plan, (env) => skippedPerEnv.get(env.tag) ?? 0),
    progress: { ...progress },
  });

  // The first judge failure of the run is told at once; the summary has them all.
  let judgeWarned = false;
  const onJudge = (episode: PlannedEpisode, counts: EpisodeJudgeCounts) => {
    if (judgeWarned || counts.failures === 0) return;
    judgeWarned = true;
    const trouble = judgeTrouble(judgeMetrics({ requests: counts.requests, failures: counts.failures, unparseable: counts.unparseable }), counts.first_error);
    if (trouble) emit({ type: "warning", code: trouble.code, message: `${episode.env.tag} seed ${episode.seed}: ${trouble.message}` });
  };

  let next = 0;
  let ran = 0;
  const worker = async () => {
    while (next < toRun.length && !signal?.aborted) {
      const episode = toRun[next++]!;
      progress.running++;
      emit({ type: "episode_started", tag: episode.env.tag, envName: episode.env.name, seed: episode.seed, dir: episode.dir, progress: { ...progress } });
      try {
        const metrics = await runEpisode(episode, harnesses.get(episode.env.tag)!, deps, emit, scorerFor, onJudge);
        if (metrics) {
          ran++;
          progress.done++;
          if (metrics.success) progress.successes++;
          if (!finishedNormally(metrics.finish_reason)) progress.errors++;
          emit(episodeFinished(episode, metrics, { ...progress, running: progress.running - 1 }));
        }
      } finally {
        progress.running--;
      }
    }
  };
  const workers = Math.min(plan.maxConcurrentEpisodes, toRun.length);
  await Promise.all(Array.from({ length: workers }, worker));

  const summary = buildSummary(plan, client.description);
  writeFileAtomic(summaryPath(plan.outputDir), jsonText(summary));
  for (const [tag, env] of Object.entries(summary.envs)) emit({ type: "env_summary", tag, summary: env });
  const aborted = signal?.aborted ?? false;
  emit({ type: "run_finished", summary, summaryPath: summaryPath(plan.outputDir), ran, skipped, aborted, progress: { ...progress } });
  return { summary, ran, skipped, aborted };
}

/**
 * Run one episode and write its folder. Returns undefined when it was aborted (nothing is
 * written then). Failures inside the episode (model, env, judge under `on_judge_error:
 * fail`) are recorded in its metrics, not thrown; a folder that cannot be written is
 * thrown, since every later episode would fail the same way.
 */
async function runEpisode(
  episode: PlannedEpisode,
  harness: Harness,
  deps: EvalDependencies,
  emit: (event: EvalEvent) => void,
  scorerFor: (planned: PlannedEnv, env: Env) => StateRewardScorer | undefined,
  onJudge: (episode: PlannedEpisode, counts: EpisodeJudgeCounts) => void,
): Promise<EpisodeMetrics | undefined> {
  const { env: planned, seed } = episode;
  const context: EpisodeContext = { envName: planned.name, tag: planned.tag, model: deps.client.description, maxTurns: planned.maxTurns, envConfig: planned.config };
  let env: Env | undefined;
  try {
    env = await deps.createEnv(planned.name, planned.config, deps.baseDir);
    const scorer = scorerFor(planned, env);
    // The agent sees main's system-prompt addition when the env's prompt lacks the wm tags.
    if (scorer) env = withStateRewardPrompt(env, scorer.config, scorer.spec);
    const record = await harness.runEpisode({
      env,
      client: deps.client,
      seed,
      maxTurns: planned.maxTurns,
      sampling: planned.sampling,
      imagePlaceholder: planned.imagePlaceholder,
      signal: deps.signal,
      onTurn: (turn) => emit(turnFinished(episode, turn)),
    });
    const base = episodeMetrics(record, context);
    let stateReward: Partial<Pick<EpisodeMetrics, "state_reward" | "judge" | "finish_reason" | "success" | "error">> = {};
    try {
      stateReward = scorer ? await stateRewardMetrics(record, scorer, deps.signal) : {};
    } catch (err) {
      if (!(err instanceof JudgeFailedError)) throw err;
      // on_judge_error: fail. The episode ran: keep its record, but as an error (which
      // counts as a failure in the rates, as every error does), so the run fails and a
      // resume runs it again.
      stateReward = { finish_reason: "error", success: false, error: { kind: "judge_error", message: err.message } };
    }
    // Redacted here already, so no event shows what the files must not hold.
    const metrics = redactSecrets({ ...base, ...stateReward });
    if (metrics.judge) onJudge(episode, metrics.judge);
    writeEpisode(episode.dir, metrics, record);
    return metrics;
  } catch (err) {
    // Nowhere to write this episode's failure either: the run cannot go on.
    if (err instanceof OutputWriteError) throw err;
    if (isAbortError(err) || deps.signal?.aborted) return undefined;
    // A harness bug or an env that can't be built for this seed: keep a record and go on.
    const metrics = redactSecrets(failedEpisodeMetrics(seed, harness.name, context, err));
    writeEpisode(episode.dir, metrics);
    return metrics;
  } finally {
    await env?.close().catch(() => {});
  }
}

/**
 * The episode's world-model scores (src/rewards): `<section>_reward` (episode sums, after
 * the configured aggregation) and `format_correct_rate`, and the judge's counters when
 * a judge reads the sections. The scores are reported beside the env's reward, not added
 * to it. Judge failures score 0, as in training, and are counted; under
 * `on_judge_error: fail` the scorer throws a `JudgeFailedError` instead.
 */
async function stateRewardMetrics(record: EpisodeRecord, scorer: StateRewardScorer, signal?: AbortSignal): Promise<Pick<EpisodeMetrics, "state_reward" | "judge">> {
  const turns = await scorer.scoreTurns(
    record.turns.map((turn, i) => ({
      response: turn.completion.text,
      stateBefore: i === 0 ? record.resetInfo.state : record.turns[i - 1]!.info.state,
      stateAfter: turn.info.state,
    })),
    signal,
  );
  const scores = episodeStateRewardMetrics(aggregateEpisode(turns, scorer.config.aggregation), scorer.config);
  if (!needsJudge(scorer.config)) return { state_reward: scores };
  const { requests, failures, unparseable, firstError } = judgeStatsOf(turns, scorer.config);
  return { state_reward: scores, judge: { requests, failures, unparseable, ...(firstError !== undefined ? { first_error: firstError } : {}) } };
}

function turnFinished(episode: PlannedEpisode, turn: TurnRecord): TurnFinishedEvent {
  return {
    type: "turn_finished",
    tag: episode.env.tag,
    seed: episode.seed,
    turn: turn.index,
    maxTurns: episode.env.maxTurns,
    text: turn.completion.text,
    completionFinishReason: turn.completion.finishReason,
    action: parsedAction(turn),
    reward: turnReward(turn),
    done: turn.done,
    observationText: turn.observation.text,
    images: turn.observation.images.map((image, i) => ({ path: observationImageName(turn.index, i), width: image.width, height: image.height, image })),
  };
}

/** What the env parsed from the answer, as far as its info says. */
function parsedAction(turn: TurnRecord): ParsedAction {
  const { info } = turn;
  const action: ParsedAction = {};
  if (Array.isArray(info.actions)) action.actions = info.actions.map(String);
  const malformed = turnFormatError(turn);
  if (malformed !== undefined) action.formatCorrect = !malformed;
  if (typeof info.think_content === "string") action.think = info.think_content;
  if (typeof info.action_content === "string") action.answer = info.action_content;
  return action;
}

const STATE_REWARD_PREFIX = "state_reward/";

/** The step's reward, with the world-model parts VAGEN main reports as `info["state_reward/<name>"]` taken out. */
function turnReward(turn: TurnRecord): TurnReward {
  const worldModel: Record<string, number> = {};
  for (const [key, value] of Object.entries(turn.info)) {
    if (key.startsWith(STATE_REWARD_PREFIX) && typeof value === "number") worldModel[key.slice(STATE_REWARD_PREFIX.length)] = value;
  }
  const worldModelTotal = Object.values(worldModel).reduce((sum, r) => sum + r, 0);
  return { total: turn.reward, worldModel, env: turn.reward - worldModelTotal };
}

function episodeFinished(episode: PlannedEpisode, metrics: EpisodeMetrics, progress: EvalProgress): EvalEvent {
  return {
    type: "episode_finished",
    tag: episode.env.tag,
    envName: episode.env.name,
    seed: episode.seed,
    dir: episode.dir,
    success: metrics.success,
    reward: metrics.cumulative_reward,
    turns: metrics.num_turns,
    finishReason: metrics.finish_reason,
    ...(metrics.error ? { error: metrics.error } : {}),
    progress,
  };
}

/** The summary of every planned episode that has a metrics.json on disk. */
export function buildSummary(plan: EvalPlan, model: string, now = new Date()): EvalSummary {
  const envs: EvalSummary["envs"] = {};
  let complete = true;
  for (const env of plan.envs) {
    const dirs = plan.episodes.filter((e) => e.env === env).map((e) => e.dir);
    const finished = dirs.map((dir) => readEpisodeMetrics(dir)).filter((m): m is EpisodeMetrics => m !== undefined);
    if (finished.length < dirs.length) complete = false;
    envs[env.tag] = summarizeEnv(env.name, env.harness.name, dirs.length, finished);
  }
  return { created_at: now.toISOString(), model, complete, envs };
}
