/**
 * How often the `exact` scorer agrees with a judge's extraction of world-model
 * descriptions (docs/world-model.md).
 *
 *   bun bench/state-reward-agreement.ts [--judge-url URL --judge-model NAME] [--judge-key-env VAR] [--n 300] [--seed 0]
 *
 * Descriptions are written for real Sokoban and FrozenLake states (reset with seeds), in
 * several styles: the prompt's own phrasing, main's example phrasing, paraphrases
 * ("directly beneath", "to my left"), partial ones (an axis or an object left out) and
 * wrong ones (a relation flipped). The relations each states are known by construction,
 * so both readers are also checked against what was actually said. Each description is
 * wrapped in the wm protocol as a perception section, and read by the env's exact parser
 * and, with --judge-url, by the judge through the same prompt and client training uses.
 *
 * Prints a markdown table per style: exact = stated, judge = stated, exact = judge (same
 * relations), same grouped F1 against the gold state, and the mean |score difference|
 * under main's floor (0.334).
 */
import * as v from "valibot";
import type { StateRelation, StateRewardSpec } from "../envs/_common/types.ts";
import { FrozenLakeEnv, FROZENLAKE_STATE_REWARD_SPEC } from "../envs/frozenlake/index.ts";
import { SokobanEnv, SOKOBAN_STATE_REWARD_SPEC } from "../envs/sokoban/index.ts";
import { Rng } from "../src/core/rng.ts";
import { StateRewardConfig } from "../src/rewards/config.ts";
import { groupedF1, rescaleAboveChance } from "../src/rewards/f1.ts";
import { fillTemplate, isJudgeFailure, OpenAIJudge, parseRelationsReply } from "../src/rewards/judge.ts";

const arg = (name: string): string | undefined => {
  const i = process.argv.indexOf(name);
  return i > 0 ? process.argv[i + 1] : undefined;
};
const N = Number(arg("--n") ?? 300);
const rng = new Rng(Number(arg("--seed") ?? 0), 17);
const pick = <T>(items: readonly T[]): T => items[rng.int(items.length)]!;

type Vertical = NonNullable<StateRelation["vertical_relation"]>;
type Horizontal = NonNullable<StateRelation["horizontal_relation"]>;
type Style = "prompt phrasing" | "main's example phrasing" | "paraphrase" | "partial" | "wrong";
const STYLES: readonly Style[] = ["prompt phrasing", "main's example phrasing", "paraphrase", "partial", "wrong"];

/** Words an env's objects are written as (the exact parser knows the first of each). */
const NAMES: Record<string, readonly string[]> = { box: ["box"], target: ["target"], hole: ["hole"], goal: ["goal"] };

const PROMPT_V: Record<Vertical, string> = { above: "above", below: "below", same: "same row" };
const PROMPT_H: Record<Horizontal, string> = { left: "left", right: "right", same: "same column" };
const EXAMPLE_V: Record<Vertical, string> = { above: "above", below: "below", same: "in the same row as" };
const EXAMPLE_H: Record<Horizontal, string> = { left: "to the left of", right: "to the right of", same: "in the same column as" };
const PARA_V: Record<Vertical, readonly string[]> = {
  above: ["up from", "higher than", "north of"],
  below: ["beneath", "under", "down from"],
  same: ["level with", "on my row", "at the same height as"],
};
const PARA_H: Record<Horizontal, readonly string[]> = {
  left: ["to my west", "on my left-hand side", "west of"],
  right: ["east of", "on my right-hand side", "to my east"],
  same: ["directly in line vertically with", "straight up or down from", "on my column"],
};
const FLIP_V: Record<Vertical, Vertical> = { above: "below", below: "above", same: "above" };
const FLIP_H: Record<Horizontal, Horizontal> = { left: "right", right: "left", same: "left" };

interface Sample {
  env: string;
  style: Style;
  text: string;
  stated: StateRelation[];
  gold: StateRelation[];
  spec: StateRewardSpec;
}

/** The surface word for an object id in this env ("target" is "goal" on FrozenLake). */
function objectWord(env: string, id: string): string {
  return env === "FrozenLake" && id === "target" ? "goal" : NAMES[id]![0]!;
}

function describe(env: string, gold: StateRelation[], style: Style): { text: string; stated: StateRelation[] } {
  const clauses: string[] = [];
  const stated: StateRelation[] = [];
  let objects = gold;
  if (style === "partial" && gold.length > 1 && rng.chance(0.5)) objects = gold.filter((_, i) => i !== rng.int(gold.length));
  const dropAxisOf = style === "partial" && objects === gold ? rng.int(objects.length) : -1;
  const flipOf = style === "wrong" ? rng.int(objects.length) : -1;
  objects.forEach((g, i) => {
    let vert = g.vertical_relation!;
    let horiz = g.horizontal_relation!;
    if (i === flipOf) [vert, horiz] = rng.chance(0.5) ? [FLIP_V[vert], horiz] : [vert, FLIP_H[horiz]];
    const word = objectWord(env, g.object_id);
    const item: StateRelation = { object_id: g.object_id, vertical_relation: vert, horizontal_relation: horiz };
    if (i === dropAxisOf) {
      const keepVertical = rng.chance(0.5);
      if (keepVertical) item.horizontal_relation = null;
      else item.vertical_relation = null;
      clauses.push(keepVertical ? `the ${word} is ${PROMPT_V[vert]} the player` : `the ${word} is ${PROMPT_H[horiz]} of the player`);
    } else if (style === "main's example phrasing") {
      clauses.push(`the ${word} is ${EXAMPLE_V[vert]} and ${EXAMPLE_H[horiz]} the player`);
    } else if (style === "paraphrase") {
      clauses.push(`the ${word} is ${pick(PARA_V[vert])} me and ${pick(PARA_H[horiz])}`);
    } else {
      clauses.push(`the ${word} is ${PROMPT_V[vert]} and ${PROMPT_H[horiz]} of the player`);
    }
    stated.push(item);
  });
  const text = clauses.length === 0 ? "I see nothing relevant." : `${clauses.join(", and ")}.`.replace(/^t/, "T");
  return { text, stated };
}

async function samples(): Promise<Sample[]> {
  const out: Sample[] = [];
  const sokoban = new SokobanEnv({ dim_room: [7, 7], num_boxes: 2 });
  const frozen = new FrozenLakeEnv({ size: 4 });
  for (let i = 0; out.length < N; i++) {
    const onSokoban = i % 2 === 0;
    const env = onSokoban ? sokoban : frozen;
    const spec = onSokoban ? SOKOBAN_STATE_REWARD_SPEC : FROZENLAKE_STATE_REWARD_SPEC;
    const gold = spec.relations((await env.reset(1000 + i)).info.state);
    const style = STYLES[Math.floor(i / 2) % STYLES.length]!;
    const { text, stated } = describe(onSokoban ? "Sokoban" : "FrozenLake", gold, style);
    out.push({ env: onSokoban ? "Sokoban" : "FrozenLake", style, text, stated, gold, spec });
  }
  return out;
}

/** Relations as a multiset, for equality. */
function key(items: readonly StateRelation[]): string {
  return items
    .map((r) => `${r.object_id}:${r.vertical_relation}:${r.horizontal_relation}`)
    .sort()
    .join("|");
}

interface Tally {
  n: number;
  exactStated: number;
  judgeStated: number;
  agree: number;
  sameF1: number;
  scoreGap: number;
  judgeMissing: number;
}

async function main(): Promise<void> {
  const data = await samples();
  const url = arg("--judge-url");
  let judged: (StateRelation[] | null)[] = data.map(() => null);
  if (url) {
    const config = v.parse(StateRewardConfig, {
      judge_base_url: url,
      judge_model: arg("--judge-model") ?? "judge",
      judge_api_key_env: arg("--judge-key-env"),
      judge: { timeout_s: 120, max_retries: 4 },
    });
    const judge = new OpenAIJudge(config);
    const replies = await judge.complete(data.map((s) => fillTemplate(s.spec.judgePrompt, { content: s.text })));
    judged = replies.map((reply) => (isJudgeFailure(reply) ? null : parseRelationsReply(reply)));
  }

  const tallies = new Map<string, Tally>();
  const row = (name: string) => {
    let t = tallies.get(name);
    if (!t) tallies.set(name, (t = { n: 0, exactStated: 0, judgeStated: 0, agree: 0, sameF1: 0, scoreGap: 0, judgeMissing: 0 }));
    return t;
  };
  data.forEach((s, i) => {
    const exact = s.spec.exactParser!(s.text);
    const judge = judged[i];
    for (const t of [row(`${s.env}, ${s.style}`), row("all")]) {
      t.n++;
      if (key(exact) === key(s.stated)) t.exactStated++;
      if (!judge) {
        t.judgeMissing++;
        continue;
      }
      if (key(judge) === key(s.stated)) t.judgeStated++;
      if (key(judge) === key(exact)) t.agree++;
      const fExact = groupedF1(exact, s.gold, s.spec.objectWeights);
      const fJudge = groupedF1(judge, s.gold, s.spec.objectWeights);
      if (Math.abs(fExact - fJudge) < 1e-9) t.sameF1++;
      t.scoreGap += Math.abs(rescaleAboveChance(fExact, 0.334) - rescaleAboveChance(fJudge, 0.334));
    }
  });

  const pct = (x: number, n: number) => (n === 0 ? "—" : `${((100 * x) / n).toFixed(1)}%`);
  console.log(`descriptions: ${data.length}; judge: ${url ? `${arg("--judge-model") ?? "judge"} @ ${url}` : "none (exact parser only)"}\n`);
  console.log("| set | n | exact = stated | judge = stated | exact = judge | same grouped F1 | mean abs score gap | judge failed |");
  console.log("|---|---|---|---|---|---|---|---|");
  for (const [name, t] of [...tallies].sort(([a], [b]) => (a === "all" ? 1 : b === "all" ? -1 : a.localeCompare(b)))) {
    const judgedN = t.n - t.judgeMissing;
    const gap = judgedN > 0 ? (t.scoreGap / judgedN).toFixed(3) : "—";
    console.log(`| ${name} | ${t.n} | ${pct(t.exactStated, t.n)} | ${pct(t.judgeStated, judgedN)} | ${pct(t.agree, judgedN)} | ${pct(t.sameF1, judgedN)} | ${gap} | ${url ? t.judgeMissing : "—"} |`);
  }
}

await main();
