/**
 * FrozenLake prompt texts (VAGEN main `frozenlake/utils/prompt.py`, spec 3.4; the paper's
 * formats from the legacy prompts). Exact wording, since models are trained on it.
 */
import { actionLimitLine, evalModePrompt, noThinkPrompt, paperFormatPrompt, wmFormatLines, wmRules, type PaperFormatText } from "../_common/format-prompt.ts";

export const FROZENLAKE_GUIDE = `You are a FrozenLake solver.
FrozenLake Quick Guide
Goal: Reach the goal (G).
Symbols (If image is provided there are no symbols):
_ Frozen | O Hole | G Goal | P Player | X Player fell into hole | V Player on goal
Rules:
1. Avoid falling into holes.
2. Frozen tiles are slippery, you may move perpendicular to your intended direction.
Actions you can take: Left, Down, Right, Up.`;

export const FROZENLAKE_PROMPT_FORMATS = [
  "free_think",
  "wm",
  "no_think",
  "eval_mode",
  "grounding",
  "worldmodeling",
  "grounding_worldmodeling",
] as const;
export type FrozenLakePromptFormat = (typeof FROZENLAKE_PROMPT_FORMATS)[number];

const FREE_THINK_EXAMPLES = `
Example 1:
<think>The goal is below me. I should go down to reach it while avoiding the hole on my left.</think>
<answer>Down</answer>

Example 2:
<think>The goal is to my right and there's a hole directly below me. I should go right first to avoid the hole.</think>
<answer>Right</answer>

Example 3:
<think>I can see the goal is up and to the left. I should move up first to get closer.</think>
<answer>Up</answer>
`;

const WM_EXAMPLES = `
Example 1:
<perception>The goal is below and right of the player, and the hole is below and same column of the player</perception>
<reasoning>I should move right to avoid the hole and get closer to the goal</reasoning>
<prediction>The goal will be below and same column of the player, and the hole will be below and left of the player</prediction>
<answer>Right</answer>

Example 2:
<perception>The goal is above and left of the player</perception>
<reasoning>I should move up to get closer to the goal</reasoning>
<prediction>The goal will be same row and left of the player</prediction>
<answer>Up</answer>

Example 3:
<perception>The goal is same row and right of the player, and the hole is above and right of the player</perception>
<reasoning>I should move right to reach the goal</reasoning>
<prediction>The goal will be same row and same column of the player, and the hole will be above and same column of the player</prediction>
<answer>Right</answer>
`;

const PAPER_TEXTS: Record<"grounding" | "worldmodeling" | "grounding_worldmodeling", PaperFormatText> = {
  grounding: {
    format: "<think><observation>...</observation><reasoning>...</reasoning></think>",
    description: "You should first describe the observation, then your reasoning, and finally your answer.",
    additionalInfo:
      "Inside the <observation> tags, describe the position of the target (gift box) and each hole (blue) relative to the player. For each object, you must specify both its vertical (above, below, same) and horizontal (left, right, same) direction.",
    example:
      "<think><observation>The player is on the above the target</observation><reasoning>I should go down then left to reach the target</reasoning></think><answer>Down{sep}Left</answer>",
  },
  worldmodeling: {
    format: "<think><reasoning>...</reasoning><prediction>...</prediction></think><answer>...</answer>",
    description: "You should first give your reasoning, then predict the next state, and finally your answer.",
    additionalInfo:
      "Inside the <prediction> tags, describe the position of the target (gift box) and each hole (blue) relative to the player. For each object, you must specify both its vertical (above, below, same) and horizontal (left, right, same) direction.",
    example:
      "<think><reasoning>I can see the target is on my down left, I should go down then left</reasoning><prediction>The player will reach the target</prediction></think><answer>Down{sep}Left</answer>",
  },
  grounding_worldmodeling: {
    format: "<think><observation>...</observation><reasoning>...</reasoning><prediction>...</prediction></think><answer>...</answer>",
    description: "You should first describe the observation, then your reasoning, then predict the next state, and finally your answer.",
    additionalInfo:
      "For the content you provide within the `<observation>` and `<prediction>` tags, you must strictly describe the relative position of the `target` (the gift box) and any visible `hole` (blue circles) objects **relative to the player**. Your description/prediction must include **both** a vertical and a horizontal directional relationship for each object. Use ONLY the terms `above`, `below`, `left`, `right`, or `same` for describing these relationships.",
    example:
      "<think><observation>The player is above and on the right side of target. There is a hole below and at the left of the player</observation><reasoning>I should go down twice first to reach th same row as the target</reasoning><prediction>The player will be in the same row and to the right of the target.</prediction></think><answer>Down{sep}Down</answer>",
  },
};

export function frozenLakeFormatPrompt(format: FrozenLakePromptFormat, maxActions: number, actionSep: string, addExample: boolean): string {
  const limit = actionLimitLine(maxActions, actionSep);
  switch (format) {
    case "free_think": {
      const base = `${limit}\nYou should first give your reasoning, and then your answer.\nYour response should be in the format of:\n<think>...</think><answer>...</answer>`;
      return addExample ? `${base}\n${FREE_THINK_EXAMPLES}` : base;
    }
    case "wm": {
      // Unlike Sokoban's, FrozenLake's wm base prompt has no trailing newline.
      const base = `${limit}\n${wmFormatLines(false)}\n\n${wmRules("the `goal` and any visible `hole` objects", maxActions, actionSep)}`;
      return addExample ? `${base}\n${WM_EXAMPLES}` : base;
    }
    case "no_think":
      return noThinkPrompt(maxActions, actionSep, "<answer>Down{sep}Left</answer>", addExample);
    case "eval_mode":
      return evalModePrompt(maxActions, actionSep, "<answer>Down{sep}Left</answer>", addExample);
    default:
      return paperFormatPrompt(PAPER_TEXTS[format], maxActions, actionSep, addExample);
  }
}

export function frozenLakeSystemPrompt(format: FrozenLakePromptFormat, maxActions: number, actionSep: string, addExample: boolean): string {
  return `${FROZENLAKE_GUIDE}\n${frozenLakeFormatPrompt(format, maxActions, actionSep, addExample)}`;
}
