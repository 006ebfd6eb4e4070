/**
 * Sokoban's side of the world-model reward (VAGEN main `state_reward_spec.py`): where the
 * boxes and targets are relative to the player, how the judge is asked to read a
 * description, and the deterministic reader the `exact` scorer uses.
 *
 * Every box counts (on a target or not) and every target counts (covered or not),
 * because that is what the agent can see.
 */
import { closedVocabularyParser, gridRelations } from "../_common/relation-parser.ts";
import type { StateRewardSpec } from "../_common/types.ts";

const JUDGE_PROMPT = `Extract the spatial relations described below into JSON.

Output a JSON array. One object per thing mentioned, with exactly these keys:
  "object_id"           "box" or "target". Any box -- "box0", "a box", "the box" -- is "box".
  "vertical_relation"   "above", "below", "same", or null if not stated.
  "horizontal_relation" "left", "right", "same", or null if not stated.

Relations are relative to the player. Describe only what the text states; do not infer.
If nothing mappable is described, output [].

Text:
{content}

JSON:`;

/**
 * Plain sentences, on purpose: showing the agent JSON would make it emit JSON, the judge
 * a re-parser of its own format, and the score a measure of format compliance.
 */
const EXAMPLES = {
  state_estimation:
    "Before acting, say in plain words what you see:\n" +
    "<perception>The box is below and in the same column as the player, and the target is below and in the same column as the player.</perception>",
  transition_prediction:
    "After choosing, say in plain words what will follow:\n" +
    "<prediction>The box will be below and in the same column as the player, and the target will be in the same row and same column as the player.</prediction>",
};

const AXES = `Relations are relative to you: vertical is above/below/same, horizontal is left/right/same.
Each description is scored against the real layout, so inventing objects costs more than
omitting them, and describing something that is not there scores nothing for it.`;

/** The paper's v1 YES/NO templates (spec 6.4), Sokoban's rules. */
const yesNo = (what: string, when: string) => `You are judging a Sokoban agent's ${what}.
Ground-truth ${when} state (each object relative to the player; row 0 is the top):
{state}

The agent wrote:
{content}

Answer YES only if the text is correct AND specific: it must state at least one directional
relationship between the player and a box or a target, and every relationship it states must
agree with the ground truth. Absolute positions ("on the left side of the room") do not count;
equivalent inversions ("the player is above the box" for "the box is below the player") are
accepted. Generic statements fail.
Think step by step, then answer in the form <think>...</think><answer>YES</answer> or
<think>...</think><answer>NO</answer>.`;

const OBJECT_IDS = { box: "box", target: "target" } as const;

export const SOKOBAN_STATE_REWARD_SPEC: StateRewardSpec = {
  relations: (state) => gridRelations(state, OBJECT_IDS),
  // A missed target matters as much as the boxes together.
  objectWeights: { target: 0.5, box: 0.5 },
  judgePrompt: JUDGE_PROMPT,
  exactParser: closedVocabularyParser(OBJECT_IDS),
  examples: EXAMPLES,
  axes: AXES,
  yesNoPrompts: {
    state_estimation: yesNo("description of what it currently sees", "current"),
    transition_prediction: yesNo("prediction of the state after its actions", "next"),
  },
  paperF1: "sokoban_repetition",
};
