/**
 * Telling people when the world-model judge is down. Under `on_judge_error: score_zero`
 * a failed judge request scores its section 0 and is only counted, so a run whose judge
 * never answered would look like one whose agent describes the world badly. These are
 * the pieces that keep that visible: the metric keys the counters go under, the warning
 * a run shows when they are not zero (pure, over a step's metrics, so the trainer and
 * the eval runner say the same thing), and the error `on_judge_error: fail` throws.
 */
import { VagenError } from "../core/errors.ts";
import { redactText } from "../config/index.ts";

/** The judge counters of a step's metrics; the trainer prefixes them with `<split>/<tag>/`. */
export const JUDGE_METRIC = {
  requests: "state_reward/judge_requests",
  failures: "state_reward/judge_failures",
  unparseable: "state_reward/judge_unparseable",
} as const;

/** A warning for the run's log and dashboard. */
export interface JudgeTrouble {
  code: "judge_failures";
  message: string;
}

/** What the user can do about failures that were scored 0, said the same way everywhere. */
export const JUDGE_FAILURE_ADVICE = "those state-reward sections scored 0; check the judge server (state_reward.judge_base_url), or set state_reward.on_judge_error: fail to stop instead";

/**
 * The warning for a step's metrics when any judge request failed, or undefined. Reads
 * every `<prefix>state_reward/judge_failures` key (a step holds one per env spec, e.g.
 * `train/sokoban/state_reward/judge_failures`) with its `judge_requests` beside it.
 * `firstError`, when the caller has it (`JudgeStats.firstError`), is quoted.
 */
export function judgeTrouble(metrics: Readonly<Record<string, number>>, firstError?: string): JudgeTrouble | undefined {
  const parts: string[] = [];
  for (const [key, failures] of Object.entries(metrics)) {
    if (!key.endsWith(JUDGE_METRIC.failures) || !(failures > 0)) continue;
    const prefix = key.slice(0, key.length - JUDGE_METRIC.failures.length);
    const requests = metrics[`${prefix}${JUDGE_METRIC.requests}`];
    const where = prefix.replace(/\/$/, "");
    parts.push(`${failures}${requests === undefined ? "" : ` of ${requests}`} request(s)${where ? ` (${where})` : ""}`);
  }
  if (parts.length === 0) return undefined;
  const cause = firstError === undefined ? "" : `; first error: ${redactText(firstError)}`;
  return { code: "judge_failures", message: `world-model judge failed ${parts.join(", ")}${cause}; ${JUDGE_FAILURE_ADVICE}` };
}

/**
 * Judge requests failed after their retries under `on_judge_error: fail`. Thrown by
 * `StateRewardScorer.scoreTurns`, so a training step stops with it and an eval episode
 * ends in an error carrying it.
 */
export class JudgeFailedError extends VagenError {
  /** The judge's endpoint (credentials redacted). */
  readonly judgeUrl: string;
  /** The first failure's message, from the client: endpoint, status or timeout. */
  readonly detail: string;

  constructor(
    judgeUrl: string,
    readonly failures: number,
    readonly requests: number,
    detail: string,
  ) {
    const url = redactText(judgeUrl);
    const why = redactText(detail);
    super(
      `world-model judge at ${url}: ${failures} of ${requests} request(s) failed after their retries: ${why}`,
      "state_reward.on_judge_error is fail; start or fix the judge (state_reward.judge_base_url, judge.timeout_s, judge.max_retries), or set on_judge_error: score_zero to score those sections 0 and go on",
    );
    this.name = "JudgeFailedError";
    this.judgeUrl = url;
    this.detail = why;
  }
}
