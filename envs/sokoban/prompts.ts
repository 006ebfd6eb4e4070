/**
 * Sokoban prompt texts (VAGEN main `utils/prompt.py`, spec 2.8; the paper's formats from
 * the legacy prompts). The wording is what models are trained on, so it is kept exact.
 */
import {
  actionLimitLine,
  evalModePrompt,
  noThinkPrompt,
  paperFormatPrompt,
  wmFormatLines,
  wmRules,
  type PaperFormatText,
} from "../_common/format-prompt.ts";

export const SOKOBAN_GUIDE = `You are a Sokoban solver.
Sokoban Quick Guide
Goal: Push all boxes onto targets.
Symbols (If image is provided there are no symbols):
# Wall | _ Floor | O Target | X Box | P You | √ Box on Target | S You on Target
Rules:
1. Push boxes (can't pull).
2. Avoid walls.
Actions you can take: Left, Down, Right, Up.`;

export const SOKOBAN_PROMPT_FORMATS = [
  "free_think",
  "wm",
  "wm_think",
  "free_wm",
  "no_think",
  "eval_mode",
  "grounding",
  "worldmodeling",
  "grounding_worldmodeling",
] as const;
export type SokobanPromptFormat = (typeof SOKOBAN_PROMPT_FORMATS)[number];

const FREE_THINK_EXAMPLES = `
Example 1:
<think>The box is one step below me, and the target is two steps below me. I should go down to reach the box and then push it down to the target.</think>
<answer>Down</answer>

Example 2:
<think>The box is to the right of me, and the target is further to the right. I need to move right to get behind the box and push it toward the target.</think>
<answer>Right</answer>

Example 3:
<think>The box is above me, and the target is above the box. I should move up to reach the box and then push it upward to the target.</think>
<answer>Up</answer>
`;

const WM_EXAMPLES = `
Example 1:
<perception>The box is below and right of the player, and the target is below and right of the player</perception>
<reasoning>I should move right to align my column with the box and the target</reasoning>
<prediction>The box will be below and same column of the player, and the target will be below and same column of the player</prediction>
<answer>Right</answer>

Example 2:
<perception>The box is above and left of the player, and the target is above and same column of the player</perception>
<reasoning>I should move up to align my row with the box and reach the target's row position</reasoning>
<prediction>The box will be same row and left of the player, and the target will be same row and same column of the player</prediction>
<answer>Up</answer>

Example 3:
<perception>The box is same row and right of the player, and the target is same row and left of the player</perception>
<reasoning>I should move right to push the box right while keeping the target on my left</reasoning>
<prediction>The box will be same row and right of the player, and the target will be same row and left of the player</prediction>
<answer>Right</answer>
`;

const OBJECTS = "the `target` and any visible `box` objects";

const PAPER_TEXTS: Record<"grounding" | "worldmodeling" | "grounding_worldmodeling", PaperFormatText> = {
  grounding: {
    format: "<think><observation>...</observation><reasoning>...</reasoning></think><answer>...</answer>",
    description: "You should first give the description of your observation, then your reasoning, and finally your answer.",
    additionalInfo:
      "Inside the `<observation>` tags, describe the position of the `target` (red) and each `box`(yellow) relative to the player. For each object, you must specify **both** its vertical (`above`, `below`, `same`) and horizontal (`left`, `right`, `same`) direction.",
    example:
      "<think><observation>The box is below the player and the target is below the box</observation><reasoning>I need to go down then push the box down to the target</reasoning></think><answer>Down{sep}Down</answer>",
  },
  worldmodeling: {
    format: "<think><reasoning>...</reasoning><prediction>...</prediction></think><answer>...</answer>",
    description: "You should first give your reasoning, then predict the next state, and finally your answer.",
    additionalInfo:
      "Inside the `<prediction>` tags, describe the position of the `target` (red) and each `box`(yellow) relative to the player. For each object, you must specify **both** its vertical (`above`, `below`, `same`) and horizontal (`left`, `right`, `same`) direction.",
    example:
      "<think><reasoning>I need to go right then push the box down to the target.</reasoning><prediction>The player will be above the box, the target and box will be at the same place.</prediction></think><answer>Right{sep}Down</answer>",
  },
  grounding_worldmodeling: {
    format: "<think><observation>...</observation><reasoning>...</reasoning><prediction>...</prediction></think><answer>...</answer>",
    description:
      "You should first give the description of your observation, then your reasoning, then predict the next state, and finally your answer.",
    additionalInfo:
      "For the content you provide within the `<observation>` and `<prediction>` tags, you must strictly describe the relative position of the `target` and any visible `box` objects **relative to the player**. Your description/prediction must include **both** a vertical and a horizontal directional relationship for each object. Use ONLY the terms `above`, `below`, `left`, `right`, or `same` for describing these relationships.",
    example:
      "<think><observation>The box is below and to right of the player and the target is below and to the right of the player</observation><reasoning>I need to go right then go down to push the box down to the target</reasoning><prediction>The player will be above the box and target, the target and box will be at the same row.</prediction></think><answer>Right{sep}Down</answer>",
  },
};

export function sokobanFormatPrompt(format: SokobanPromptFormat, maxActions: number, actionSep: string, addExample: boolean): string {
  const limit = actionLimitLine(maxActions, actionSep);
  switch (format) {
    case "free_think": {
      const base = `${limit}\nYou should first give your reasoning, and then your answer.\nYour response should be in the format of:\n<think>...</think><answer>...</answer>`;
      return addExample ? `${base}\n${FREE_THINK_EXAMPLES}` : base;
    }
    case "wm":
    case "wm_think":
    case "free_wm": {
      const base = `${limit}\n${wmFormatLines(format !== "wm")}\n\n${wmRules(OBJECTS, maxActions, actionSep)}\n`;
      return addExample ? `${base}\n${WM_EXAMPLES}` : base;
    }
    case "no_think":
      return noThinkPrompt(maxActions, actionSep, "<answer>Down{sep}Down</answer>", addExample);
    case "eval_mode":
      return evalModePrompt(maxActions, actionSep, "<answer>Down{sep}Down</answer>", addExample);
    default:
      return paperFormatPrompt(PAPER_TEXTS[format], maxActions, actionSep, addExample);
  }
}

export function sokobanSystemPrompt(format: SokobanPromptFormat, maxActions: number, actionSep: string, addExample: boolean): string {
  return `${SOKOBAN_GUIDE}\n${sokobanFormatPrompt(format, maxActions, actionSep, addExample)}`;
}
