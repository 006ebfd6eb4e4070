/**
 * FrozenLake's side of the world-model reward. VAGEN main declares no spec for FrozenLake;
 * this one follows the paper (spec 6.4): the target (the goal, drawn as a gift box) and
 * every hole, relative to the player, weighted 0.7 / 0.3.
 */
import { closedVocabularyParser, gridRelations } from "../_common/relation-parser.ts";
import type { StateRewardSpec } from "../_common/types.ts";

const JUDGE_PROMPT = `Extract the spatial relations described below into JSON.

Output a JSON array. One object per thing mentioned, with exactly these keys:
  "object_id"           "target" or "hole". The goal -- "the goal", "G", "the gift box" -- is "target"; any hole is "hole".
  "vertical_relation"   "above", "below", "same", or null if not stated.
  "horizontal_relation" "left", "right", "same", or null if not stated.

Relations are relative to the player. Describe only what the text states; do not infer.
If nothing mappable is described, output [].

Text:
{content}

JSON:`;

const EXAMPLES = {
  state_estimation:
    "Before acting, say in plain words what you see:\n" +
    "<perception>The goal is below and right of the player, and a hole is below and same column of the player.</perception>",
  transition_prediction:
    "After choosing, say in plain words what will follow:\n" +
    "<prediction>The goal will be below and same column of the player, and the hole will be below and left of the player.</prediction>",
};

const AXES = `Relations are relative to you: vertical is above/below/same row, horizontal is left/right/same column.
Each description is scored against the real layout, so inventing holes costs more than
omitting them, and the goal counts most.`;

const yesNo = (what: string, when: string) => `You are judging a FrozenLake agent's ${what}.
Ground-truth ${when} state (the goal as "target" and each hole, relative to the player; row 0 is the top):
{state}

The agent wrote:
{content}

Answer YES only if the text is correct AND specific: it must state the direction of the goal
relative to the player, and every relationship it states (goal or hole) must agree with the
ground truth. Absolute positions do not count; equivalent inversions are accepted. Generic
statements fail.
Think step by step, then answer in the form <think>...</think><answer>YES</answer> or
<think>...</think><answer>NO</answer>.`;

export const FROZENLAKE_STATE_REWARD_SPEC: StateRewardSpec = {
  relations: (state) => gridRelations(state, { goal: "target", hole: "hole" }),
  objectWeights: { target: 0.7, hole: 0.3 },
  judgePrompt: JUDGE_PROMPT,
  exactParser: closedVocabularyParser({ goal: "target", target: "target", "gift box": "target", hole: "hole" }),
  examples: EXAMPLES,
  axes: AXES,
  yesNoPrompts: {
    state_estimation: yesNo("description of what it currently sees", "current"),
    transition_prediction: yesNo("prediction of the state after its actions", "next"),
  },
  paperF1: "weighted_bipartite",
};
