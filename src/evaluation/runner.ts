/**
 * The eval runner: every (env, seed) episode of the config, run concurrently through its
 * harness against one shared client, each written to its own folder as it finishes, then
 * summary.json rebuilt from what is on disk.
 *
 * Resume: an episode whose folder holds a metrics.json from a normal finish is skipped.
 * Abort (Ctrl-C): no new episode starts, in-flight ones are cancelled and not written,
 * and the summary covers what had finished.
 */
import { mkdirSync } from "node:fs";
import { join } from "node:path";
import { stringify } from "yaml";
import type { Env } from "../../envs/_common/types.ts";
import { isAbortError } from "../clients/errors.ts";
import type { InferenceClient, SamplingParams } from "../clients/types.ts";
import { toSamplingParams } from "../clients/config.ts";
import { createHarness } from "../harness/registry.ts";
import type { Harness } from "../harness/types.ts";
import { redactSecrets } from "../config/index.ts";
import { VagenError } from "../core/errors.ts";
import { type EnvEvalSpec, type EvalConfig, checkEvalConfig, episodeSeedsForTag, harnessNameAndOptions } from "./config.ts";
import { type EpisodeContext, type EpisodeMetrics, episodeMetrics, failedEpisodeMetrics, finishedNormally } from "./episode-metrics.ts";
import { configCopyPath, episodeDir, summaryPath } from "./layout.ts";
import { jsonText, readEpisodeMetrics, removeStaleTemporaries, writeEpisode, writeFileAtomic } from "./outputs.ts";
import type { EvalProgress, EvalReporter } from "./progress.ts";
import { type EvalSummary, summarizeEnv } from "./summary.ts";

/** Creates an env by registered name or by import path (resolved against `baseDir`). */
export type EnvFactory = (nameOrImportPath: string, config: Record<string, unknown>, baseDir?: string) => Promise<Env>;

export interface EvalDependencies {
  client: InferenceClient;
  createEnv: EnvFactory;
  reporter?: EvalReporter;
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

interface Job {
  tag: string;
  spec: EnvEvalSpec;
  seed: number;
  harness: Harness;
  sampling: SamplingParams;
  context: EpisodeContext;
}

export async function runEvaluation(config: EvalConfig, deps: EvalDependencies): Promise<EvalResult> {
  checkEvalConfig(config);
  const { client, signal } = deps;
  const reporter = deps.reporter;
  const outputDir = config.output_dir;
  mkdirSync(outputDir, { recursive: true });
  writeFileAtomic(configCopyPath(outputDir), stringify(redactSecrets(config)));

  const harnesses = new Map<string, Harness>();
  for (const [tag, spec] of Object.entries(config.envs)) {
    const { name, options } = harnessNameAndOptions(spec.harness);
    harnesses.set(tag, await createHarness(name, options, deps.baseDir));
    await checkEnvCreates(tag, spec, deps.createEnv, deps.baseDir);
    removeStaleTemporaries(join(outputDir, tag));
  }

  const jobs: Job[] = [];
  const progress: EvalProgress = { done: 0, total: 0, running: 0, successes: 0, errors: 0 };
  for (const [tag, spec] of Object.entries(config.envs)) {
    const sampling = { ...toSamplingParams(config.model.sampling), ...toSamplingParams(spec.sampling) };
    const context: EpisodeContext = { envName: spec.name, tag, model: client.description, maxTurns: spec.max_turns, envConfig: spec.config };
    for (const seed of episodeSeedsForTag(config, tag)) {
      progress.total++;
      const previous = config.run.resume ? readEpisodeMetrics(episodeDir(outputDir, tag, seed)) : undefined;
      if (previous && finishedNormally(previous.finish_reason)) {
        progress.done++;
        if (previous.success) progress.successes++;
        continue;
      }
      jobs.push({ tag, spec, seed, harness: harnesses.get(tag)!, sampling, context });
    }
  }
  const skipped = progress.done;
  reporter?.start({ total: progress.total, skipped });

  let next = 0;
  let ran = 0;
  const worker = async () => {
    while (next < jobs.length && !signal?.aborted) {
      const job = jobs[next++]!;
      progress.running++;
      reporter?.episodeStarted?.({ ...progress });
      try {
        const metrics = await runJob(job, deps, outputDir);
        if (metrics) {
          ran++;
          progress.done++;
          if (metrics.success) progress.successes++;
          if (!finishedNormally(metrics.finish_reason)) progress.errors++;
          reporter?.episodeDone(metrics, { ...progress, running: progress.running - 1 });
        }
      } finally {
        progress.running--;
      }
    }
  };
  const workers = Math.min(config.run.max_concurrent_episodes, jobs.length);
  await Promise.all(Array.from({ length: workers }, worker));
  reporter?.finish({ ...progress });

  const summary = buildSummary(config, client.description);
  writeFileAtomic(summaryPath(outputDir), jsonText(summary));
  return { summary, ran, skipped, aborted: signal?.aborted ?? false };
}

/**
 * Run one episode and write its folder. Returns undefined when it was aborted (nothing is
 * written then). Failures inside the episode are recorded in its metrics, not thrown.
 */
async function runJob(job: Job, deps: EvalDependencies, outputDir: string): Promise<EpisodeMetrics | undefined> {
  const dir = episodeDir(outputDir, job.tag, job.seed);
  let env: Env | undefined;
  try {
    env = await deps.createEnv(job.spec.name, job.spec.config, deps.baseDir);
    const record = await job.harness.runEpisode({
      env,
      client: deps.client,
      seed: job.seed,
      maxTurns: job.spec.max_turns,
      sampling: job.sampling,
      imagePlaceholder: typeof job.spec.config.image_placeholder === "string" ? job.spec.config.image_placeholder : undefined,
      signal: deps.signal,
    });
    // Redacted here already, so progress lines never show what the files must not hold.
    const metrics = redactSecrets(episodeMetrics(record, job.context));
    writeEpisode(dir, metrics, record);
    return metrics;
  } catch (err) {
    if (isAbortError(err) || deps.signal?.aborted) return undefined;
    // A harness bug or an env that can't be built for this seed: keep a record and go on.
    const metrics = redactSecrets(failedEpisodeMetrics(job.seed, job.harness.name, job.context, err));
    writeEpisode(dir, metrics);
    return metrics;
  } finally {
    await env?.close().catch(() => {});
  }
}

/** Build one env up front so a misspelled env name or config key fails before any request. */
async function checkEnvCreates(tag: string, spec: EnvEvalSpec, createEnv: EnvFactory, baseDir?: string): Promise<void> {
  let env: Env;
  try {
    env = await createEnv(spec.name, spec.config, baseDir);
  } catch (err) {
    const message = err instanceof Error ? err.message : String(err);
    throw new VagenError(`envs.${tag}: could not create env "${spec.name}": ${message}`, err instanceof VagenError ? err.hint : undefined);
  }
  await env.close();
}

/** The summary of everything the config asks for that has a metrics.json on disk. */
export function buildSummary(config: EvalConfig, model: string, now = new Date()): EvalSummary {
  const envs: EvalSummary["envs"] = {};
  let complete = true;
  for (const [tag, spec] of Object.entries(config.envs)) {
    const seeds = episodeSeedsForTag(config, tag);
    const finished = seeds
      .map((seed) => readEpisodeMetrics(episodeDir(config.output_dir, tag, seed)))
      .filter((m): m is EpisodeMetrics => m !== undefined);
    if (finished.length < seeds.length) complete = false;
    envs[tag] = summarizeEnv(spec.name, harnessNameAndOptions(spec.harness).name, seeds.length, finished);
  }
  return { created_at: now.toISOString(), model, complete, envs };
}
