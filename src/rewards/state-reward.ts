/**
 * World-model rewards for a batch of turns (VAGEN main's `StateRewardWrapper.step`, as
 * pure functions plus one batched judge call).
 *
 * Per turn:
 * 1. Gate: the response must be exactly main's wm protocol (native thinking allowed),
 *    and every enabled section must have content; otherwise every section scores 0.
 * 2. Read each enabled section into relations: the judge's extraction (all of the
 *    batch's requests at once) or the env's exact parser. An unparseable judgement
 *    scores 0 and is counted; so does a failed request, unless `on_judge_error: fail`,
 *    where `scoreTurns` throws a `JudgeFailedError` naming the judge and the cause.
 * 3. Score: reward · max(0, (F1 - base) / (1 - base)) under main's grouped F1, or one of
 *    the paper's variants (`method`).
 * 4. Place: each section's score on the last token overlapping its text, or on the
 *    turn's last token (`credit_site`).
 *
 * `state_estimation` reads `<perception>` against the state before the step;
 * `transition_prediction` reads `<prediction>` against the state after it. Both states
 * are the `info.state` the env returned (reset's info, then each step's).
 */
import type { StateRelation, StateRewardSpec } from "../../envs/_common/types.ts";
import { VagenError } from "../core/errors.ts";
import { parseWmSections, type CharSpan, type WmSection, type WmSections } from "../../envs/_common/wm-format.ts";
import { enabledSections, needsJudge, type StateRewardConfig, type StateRewardSection } from "./config.ts";
import { creditPosition } from "./credit.ts";
import { groupedF1, rescaleAboveChance } from "./f1.ts";
import { fillTemplate, isJudgeFailure, OpenAIJudge, parseRelationsReply, parseYesNo, type Judge, type JudgeReply } from "./judge.ts";
import { JUDGE_METRIC, JudgeFailedError } from "./judge-trouble.ts";
import { sokobanPaperF1, sokobanPaperScore, TopKStringTracker } from "./paper.ts";

/** The section of the response each reward reads. */
export const SECTION_TAG: Record<StateRewardSection, WmSection> = {
  state_estimation: "perception",
  transition_prediction: "prediction",
};

export interface TurnInput {
  /** The turn's decoded response, exactly as the env received it. */
  response: string;
  /**
   * end(k) per response token (credit.ts: `tokenEndsByPrefixDecode` or
   * `tokenEndsFromPieces`); without it scores carry no position.
   */
  tokenEnds?: readonly number[];
  /** `info.state` before the step (reset's info for the first turn). */
  stateBefore: unknown;
  /** `info.state` the step returned. */
  stateAfter: unknown;
}

export type SectionStatus = "scored" | "gated" | "judge_failed" | "unparseable";

export interface SectionResult {
  section: StateRewardSection;
  /** What the turn is paid for this section (0 unless scored). */
  score: number;
  /** The F1 (or the YES/NO 1/0) before floor and reward; null unless scored. */
  quality: number | null;
  status: SectionStatus;
  /** Response-token index the score goes on; null without token ends. */
  position: number | null;
  /** Why the judge gave no reply (status `judge_failed`): the client's message, naming the endpoint. */
  judgeError?: string;
  /** Where the section's content sits in the response; absent when gated on format. */
  span?: CharSpan;
  /** The relations read from the text (F1 methods). */
  predicted?: StateRelation[];
  gold: StateRelation[];
}

export interface TurnStateReward {
  formatCorrect: boolean;
  /** Why nothing was scored: the format, or an empty enabled section. */
  gate: "ok" | "format" | "missing_section";
  /** One per enabled section, in protocol order. */
  sections: SectionResult[];
  /** Σ section scores. */
  total: number;
}

/** Counters since the last `takeStats()`, for a step's metrics. */
export interface JudgeStats {
  requests: number;
  failures: number;
  unparseable: number;
  /** The first failed request's message, when there was one. */
  firstError?: string;
}

/** One section of one turn that passed the gate and is to be read and scored. */
interface WorkItem {
  turn: number;
  slot: number;
  section: StateRewardSection;
  text: string;
  gold: StateRelation[];
  prompt?: string;
}

export class StateRewardScorer {
  private stats: JudgeStats = { requests: 0, failures: 0, unparseable: 0 };
  /** The paper's Sokoban repetition trackers, one per section, kept for the whole run. */
  private readonly trackers = new Map<StateRewardSection, TopKStringTracker>();

  constructor(
    readonly config: StateRewardConfig,
    readonly spec: StateRewardSpec,
    private readonly judge: Judge | null,
  ) {
    if (needsJudge(config) && enabledSections(config).length > 0 && !judge) {
      throw new VagenError("state_reward: this config needs a judge (judge_base_url and judge_model), but none was given", "run checkStateRewardSetup before building the scorer");
    }
  }

  /** A scorer with the judge the config names (none for the exact scorer). */
  static create(config: StateRewardConfig, spec: StateRewardSpec, env: Record<string, string | undefined> = process.env): StateRewardScorer {
    const judge = needsJudge(config) && enabledSections(config).length > 0 ? new OpenAIJudge(config, env) : null;
    return new StateRewardScorer(config, spec, judge);
  }

  /** Returns and resets the judge counters. */
  takeStats(): JudgeStats {
    const stats = this.stats;
    this.stats = { requests: 0, failures: 0, unparseable: 0 };
    return stats;
  }

  /** Scores a rollout step's turns; the judge sees all of them in one batch. */
  async scoreTurns(turns: readonly TurnInput[], signal?: AbortSignal): Promise<TurnStateReward[]> {
    const enabled = enabledSections(this.config);
    const results: TurnStateReward[] = [];
    const work: WorkItem[] = [];

    turns.forEach((input, turn) => {
      const parsed = parseWmSections(input.response, { allowNativeThinking: true });
      const gate = gateOf(parsed, enabled);
      const sections = enabled.map(({ section }, slot): SectionResult => {
        const gold = this.spec.relations(section === "state_estimation" ? input.stateBefore : input.stateAfter);
        const span = parsed.spans?.[SECTION_TAG[section]];
        const position = span && input.tokenEnds ? creditPosition(this.config.credit_site, span, input.tokenEnds) : null;
        if (gate === "ok") work.push({ turn, slot, section, text: parsed[SECTION_TAG[section]], gold });
        return { section, score: 0, quality: null, status: "gated", position, span, gold };
      });
      results.push({ formatCorrect: parsed.formatCorrect, gate, sections, total: 0 });
    });

    const judged = await this.judgeAll(work, signal);
    work.forEach((item, i) => {
      const result = results[item.turn]!.sections[item.slot]!;
      this.score(result, item, judged[i]!, enabled[item.slot]!.reward);
    });
    for (const turn of results) turn.total = turn.sections.reduce((sum, s) => sum + s.score, 0);
    return results;
  }

  /**
   * The judge's reply (or failure) per work item; null for each under the exact scorer,
   * which asks nothing. Under `on_judge_error: fail` a failure throws, counted first.
   */
  private async judgeAll(work: WorkItem[], signal?: AbortSignal): Promise<(JudgeReply | null)[]> {
    if (!needsJudge(this.config) || work.length === 0) return work.map(() => null);
    const prompts = work.map((item) => {
      if (this.config.method === "yes_no") {
        return fillTemplate(this.spec.yesNoPrompts![item.section], { state: JSON.stringify(item.gold), content: item.text });
      }
      return fillTemplate(this.spec.judgePrompt, { content: item.text });
    });
    this.stats.requests += prompts.length;
    const replies = await this.judge!.complete(prompts, signal);
    const failed = replies.filter(isJudgeFailure);
    this.stats.failures += failed.length;
    if (failed.length > 0) {
      this.stats.firstError ??= failed[0]!.error;
      if (this.config.on_judge_error === "fail") throw new JudgeFailedError(this.config.judge_base_url ?? this.judge!.description, failed.length, replies.length, failed[0]!.error);
    }
    return replies;
  }

  private score(result: SectionResult, item: WorkItem, reply: JudgeReply | null, reward: number): void {
    const read = this.read(item, reply);
    if ("status" in read) {
      result.status = read.status;
      if (read.status === "unparseable") this.stats.unparseable++;
      if (reply !== null && isJudgeFailure(reply)) result.judgeError = reply.error;
      return;
    }
    result.status = "scored";
    const { config, spec } = this;
    if ("verdict" in read) {
      result.quality = read.verdict;
      result.score = reward * read.verdict;
      return;
    }
    result.predicted = read.relations;
    if (config.method === "paper_f1" && spec.paperF1 === "sokoban_repetition") {
      result.quality = sokobanPaperF1(read.relations, item.gold).score;
      result.score = reward * sokobanPaperScore(read.relations, item.gold, item.text, this.tracker(result.section), config.repetition);
      return;
    }
    result.quality = groupedF1(read.relations, item.gold, spec.objectWeights);
    // The chance floor is main's; the paper's F1 variants pay the F1 as it is.
    result.score = reward * (config.method === "paper_f1" ? result.quality : rescaleAboveChance(result.quality, config.score_base));
  }

  /** What a section says: relations (judge or exact parser), a YES/NO verdict, or why there is nothing. */
  private read(item: WorkItem, reply: JudgeReply | null): { relations: StateRelation[] } | { verdict: 0 | 1 } | { status: "judge_failed" | "unparseable" } {
    if (this.config.scorer === "exact" && this.config.method !== "yes_no") return { relations: this.spec.exactParser!(item.text) };
    if (reply === null || isJudgeFailure(reply)) return { status: "judge_failed" };
    if (this.config.method === "yes_no") {
      const verdict = parseYesNo(reply);
      return verdict === null ? { status: "unparseable" } : { verdict };
    }
    const relations = parseRelationsReply(reply);
    return relations === null ? { status: "unparseable" } : { relations };
  }

  private tracker(section: StateRewardSection): TopKStringTracker {
    let tracker = this.trackers.get(section);
    if (!tracker) {
      tracker = new TopKStringTracker(this.config.repetition.top_m, this.config.repetition.top_k);
      this.trackers.set(section, tracker);
    }
    return tracker;
  }
}

/** Main's gates: the exact protocol first, then content in every enabled section. */
function gateOf(parsed: WmSections, enabled: readonly { section: StateRewardSection }[]): TurnStateReward["gate"] {
  if (!parsed.formatCorrect) return "format";
  return enabled.some(({ section }) => parsed[SECTION_TAG[section]] === "") ? "missing_section" : "ok";
}

/**
 * An episode's turns under `aggregation`: `per_turn` leaves them; `episode_mean` divides
 * every score by the episode's turn count, so the episode is paid its mean (main's
 * deferred `finalize_episode`), still on each section's own token.
 */
export function aggregateEpisode(turns: readonly TurnStateReward[], aggregation: StateRewardConfig["aggregation"]): TurnStateReward[] {
  if (aggregation === "per_turn") return turns.map((turn) => ({ ...turn, sections: turn.sections.map((s) => ({ ...s })) }));
  const count = Math.max(1, turns.length);
  return turns.map((turn) => {
    const sections = turn.sections.map((s) => ({ ...s, score: s.score / count }));
    return { ...turn, sections, total: sections.reduce((sum, s) => sum + s.score, 0) };
  });
}

/**
 * Adds each section's score into a per-token reward vector of the turn's response
 * (length = its token count). Scores without a position are left out.
 */
export function placeRewards(turn: TurnStateReward, tokenRewards: number[]): number[] {
  for (const section of turn.sections) {
    if (section.position !== null && section.score !== 0) tokenRewards[section.position] = (tokenRewards[section.position] ?? 0) + section.score;
  }
  return tokenRewards;
}

/**
 * An episode's metrics: `<section>_reward` (the sum of its turns' scores, only for
 * enabled sections) and `format_correct_rate` (well-formed turns over turns).
 */
export function episodeStateRewardMetrics(turns: readonly TurnStateReward[], config: StateRewardConfig): Record<string, number> {
  const metrics: Record<string, number> = {};
  for (const { section } of enabledSections(config)) {
    metrics[`${section}_reward`] = turns.reduce((sum, turn) => sum + (turn.sections.find((s) => s.section === section)?.score ?? 0), 0);
  }
  metrics.format_correct_rate = turns.length > 0 ? turns.filter((turn) => turn.formatCorrect).length / turns.length : Number.NaN;
  return metrics;
}

/** A step's judge counters as metrics (`state_reward/judge_requests`, `_failures`, `_unparseable`). */
export function judgeMetrics(stats: JudgeStats): Record<string, number> {
  return {
    [JUDGE_METRIC.requests]: stats.requests,
    [JUDGE_METRIC.failures]: stats.failures,
    [JUDGE_METRIC.unparseable]: stats.unparseable,
  };
}

/**
 * The judge counters of some scored turns (one eval episode's, say), from their sections'
 * statuses: a section that passed the gate went to the judge when the config needs one.
 * The scorer's own `takeStats` counts across every call since the last take, so
 * episodes scored at once through one scorer need this to count each on its own.
 */
export function judgeStatsOf(turns: readonly TurnStateReward[], config: StateRewardConfig): JudgeStats {
  const stats: JudgeStats = { requests: 0, failures: 0, unparseable: 0 };
  if (!needsJudge(config)) return stats;
  for (const section of turns.flatMap((turn) => turn.sections)) {
    if (section.status === "gated") continue;
    stats.requests++;
    if (section.status === "unparseable") stats.unparseable++;
    if (section.status === "judge_failed") {
      stats.failures++;
      if (section.judgeError !== undefined) stats.firstError ??= section.judgeError;
    }
  }
  return stats;
}
