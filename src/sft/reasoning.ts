/**
 * What a solver writes before its answer under the thinking formats, from the true env
 * state, in the words the env's own scorers read:
 *
 *   free_think   <think>Plan: Right, Down, Down.</think><answer>Right</answer>
 *                the solver's next moves (at most `PLAN_MOVES` of them)
 *   wm           <perception>The box is below and right of the player, and the target is
 *                below and same column of the player</perception>
 *                <reasoning>Plan: Right, Down, Down.</reasoning>
 *                <prediction>The box will be below and same column of the player, and
 *                the target will be below and same column of the player</prediction>
 *                <answer>Right</answer>
 *
 * The perception is the state before the turn, the prediction the state after the
 * answer's moves, both as `info.state` reports them; the wording is the one the wm
 * prompt's examples use and Sokoban's exact reader (`closedVocabularyParser`) parses: a
 * clause per object ("the box", "another box", "the target"), `above`/`below`/`same row`
 * and `left`/`right`/`same column`. Noise makes the descriptions imperfect on purpose:
 * each stated object is, with `noise`, wrong on one axis (drawn at random) with a value
 * drawn among the two wrong ones, so under the grouped F1 an object scores 0.5 instead
 * of 1 and a section's expected F1 is 1 - noise / 2.
 */
import type { GridObject, GridState, HorizontalRelation, VerticalRelation } from "../../envs/_common/state.ts";
import type { Rng } from "../core/rng.ts";

/** Moves a plan names: enough to say where the solver is heading, short enough to stay cheap. */
export const PLAN_MOVES = 4;

const VERTICAL: readonly VerticalRelation[] = ["above", "below", "same"];
const HORIZONTAL: readonly HorizontalRelation[] = ["left", "right", "same"];

/** `right` -> `Right`, the way the envs' prompts spell actions. */
export function actionWord(action: string): string {
  return action.charAt(0).toUpperCase() + action.slice(1);
}

/** The plan line: `Plan: Right, Down.` (the solver has none when the level can no longer be solved). */
export function planText(plan: readonly string[]): string {
  return plan.length === 0 ? "Plan: none." : `Plan: ${plan.slice(0, PLAN_MOVES).map(actionWord).join(", ")}.`;
}

function otherThan<T>(values: readonly T[], value: T, rng: Rng): T {
  const others = values.filter((v) => v !== value);
  return others[rng.int(others.length)]!;
}

/** `obj` as stated: with probability `noise`, one axis is replaced by a wrong value. */
function stated(obj: GridObject, noise: number, rng: Rng): Pick<GridObject, "object_id" | "vertical_relation" | "horizontal_relation"> {
  const { object_id, vertical_relation, horizontal_relation } = obj;
  if (noise <= 0 || rng.next() >= noise) return { object_id, vertical_relation, horizontal_relation };
  return rng.next() < 0.5
    ? { object_id, vertical_relation: otherThan(VERTICAL, vertical_relation, rng), horizontal_relation }
    : { object_id, vertical_relation, horizontal_relation: otherThan(HORIZONTAL, horizontal_relation, rng) };
}

/**
 * Every box and target of `state` relative to the player, in one sentence: "The box is
 * below and right of the player, and the target is ..." (`tense` "will be" for a
 * prediction). Boxes first, then targets, each kind in the order the state lists them.
 */
export function describeState(state: GridState, tense: "is" | "will be", noise: number, rng: Rng, objectIds: readonly string[] = ["box", "target"]): string {
  const clauses: string[] = [];
  for (const id of objectIds) {
    state.objects
      .filter((obj) => obj.object_id === id)
      .forEach((obj, i) => {
        const s = stated(obj, noise, rng);
        const vertical = s.vertical_relation === "same" ? "same row" : s.vertical_relation;
        const horizontal = s.horizontal_relation === "same" ? "same column" : s.horizontal_relation;
        clauses.push(`${i === 0 ? "the" : "another"} ${id} ${tense} ${vertical} and ${horizontal} of the player`);
      });
  }
  const sentence = clauses.join(", and ");
  return sentence.charAt(0).toUpperCase() + sentence.slice(1);
}

/** What a turn's reply is written from. */
export interface ReplyFacts {
  /** The moves the reply answers (the env's spelling, e.g. `right`). */
  moves: readonly string[];
  /** The separator between moves (the env's `action_sep`). */
  separator: string;
  /** The solver's plan from the state before the turn. */
  plan: readonly string[];
  /** The state before the turn and after the answer's moves (wm formats only). */
  before?: GridState;
  after?: GridState;
}

/** The reply in `format` (no_think and eval_mode: the answer alone). */
export function solverReply(format: string, facts: ReplyFacts, noise: number, rng: Rng): string {
  const answer = `<answer>${facts.moves.map(actionWord).join(facts.separator)}</answer>`;
  switch (format) {
    case "free_think":
      return `<think>${planText(facts.plan)}</think>${answer}`;
    case "wm":
    case "wm_think":
    case "free_wm": {
      if (!facts.before || !facts.after) throw new Error(`solverReply: the ${format} format needs the states before and after the turn`);
      const perception = describeState(facts.before, "is", noise, rng);
      const prediction = describeState(facts.after, "will be", noise, rng);
      return `<perception>${perception}</perception><reasoning>${planText(facts.plan)}</reasoning><prediction>${prediction}</prediction>${answer}`;
    }
    default:
      return answer;
  }
}
