/**
 * The pieces grid envs share to declare a state-reward spec: gold relations from their
 * `info.state`, and VAGEN main's deterministic closed-vocabulary reader of descriptions
 * (Sokoban's `exact_relations`, generalised to any object vocabulary).
 *
 * The reader finds each clause introduced by an object word (an optional article and
 * digits allowed: "the box", "box 2", "another box") and, per axis, takes the phrase
 * from {above, below, "same row"} and {left, right, "same column"} only if exactly one
 * value is named in the clause; otherwise that axis is null. It guesses nothing outside
 * the vocabulary the prompt prints, so a missing object or axis loses its F1 credit.
 */
import type { GridState } from "./state.ts";
import type { StateRelation } from "./types.ts";

type Vertical = StateRelation["vertical_relation"];
type Horizontal = StateRelation["horizontal_relation"];

const VERTICAL_PHRASES: readonly [string, NonNullable<Vertical>][] = [
  ["above", "above"],
  ["below", "below"],
  ["same row", "same"],
];
const HORIZONTAL_PHRASES: readonly [string, NonNullable<Horizontal>][] = [
  ["left", "left"],
  ["right", "right"],
  ["same column", "same"],
];

function oneRelation<T extends string>(clause: string, vocabulary: readonly [string, T][]): T | null {
  const found = new Set(vocabulary.filter(([phrase]) => clause.includes(phrase)).map(([, value]) => value));
  return found.size === 1 ? [...found][0]! : null;
}

function escapeRegExp(text: string): string {
  return text.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");
}

/**
 * A reader for the given object words, each mapped to the object id it scores as
 * (`{ goal: "target", hole: "hole" }`).
 */
export function closedVocabularyParser(objectWords: Readonly<Record<string, string>>): (text: string) => StateRelation[] {
  // Longer words first so "target" is never read as a shorter word it starts with.
  const words = Object.keys(objectWords)
    .sort((a, b) => b.length - a.length)
    .map(escapeRegExp)
    .join("|");
  const object = `(?:the\\s+|a\\s+|another\\s+)?(${words})(?:\\s*\\d+)?\\b`;
  const nextObject = `(?:,?\\s+and\\s+)?(?:the\\s+|a\\s+|another\\s+)?(?:${words})(?:\\s*\\d+)?\\b`;
  const clause = new RegExp(`${object}(.*?)(?=${nextObject}|$)`, "g");
  return (text) => {
    const lowered = text.replace(/\s+/g, " ").trim().toLowerCase();
    const items: StateRelation[] = [];
    for (const match of lowered.matchAll(clause)) {
      const body = match[2]!;
      items.push({
        object_id: objectWords[match[1]!]!,
        vertical_relation: oneRelation(body, VERTICAL_PHRASES),
        horizontal_relation: oneRelation(body, HORIZONTAL_PHRASES),
      });
    }
    return items;
  };
}

function isGridState(state: unknown): state is GridState {
  const s = state as GridState | null;
  return typeof s === "object" && s !== null && Array.isArray(s.objects) && Array.isArray(s.player);
}

/**
 * Gold relations from a grid env's `info.state`: every object whose kind is in `ids`
 * (mapped to the id it scores as), relative to the player. Anything else gives [].
 */
export function gridRelations(state: unknown, ids: Readonly<Record<string, string>>): StateRelation[] {
  if (!isGridState(state)) return [];
  const relations: StateRelation[] = [];
  for (const obj of state.objects) {
    const id = ids[obj.object_id];
    if (id === undefined) continue;
    relations.push({ object_id: id, vertical_relation: obj.vertical_relation, horizontal_relation: obj.horizontal_relation });
  }
  return relations;
}
