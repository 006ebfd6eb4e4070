/**
 * Builders for the format part of system prompts. The wording of each env's prompts is
 * observable behaviour (the model is trained on it), so the envs keep their exact texts in
 * their own prompts.ts; this module only assembles them.
 */
import { WM_FORMAT } from "./wm-format.ts";

/** How the paper's (legacy) format prompts are assembled from four pieces. */
export interface PaperFormatText {
  description: string;
  format: string;
  additionalInfo?: string;
  /** `{sep}` is replaced by the action separator. */
  example: string;
}

export function paperFormatPrompt(text: PaperFormatText, maxActions: number, actionSep: string, addExample: boolean): string {
  let prompt = `You can take up to ${maxActions} action(s) at a time, separated by ${actionSep}.\n${text.description}`;
  if (text.additionalInfo) prompt += `\n${text.additionalInfo}`;
  prompt += `\nYour response should be in the format of:\n${text.format}`;
  if (addExample) prompt += `\ne.g. ${text.example.split("{sep}").join(actionSep)}`;
  return prompt;
}

export function actionLimitLine(maxActions: number, actionSep: string): string {
  return `You can take up to ${maxActions} action(s) at a time, separated by ${actionSep}.`;
}

/**
 * The format block of main's world-model prompts: the four sections in their required
 * order; `wm_think` (and its alias `free_wm`) also allows a thinking block first.
 */
export function wmFormatLines(nativeThinking: boolean): string {
  const thinking = nativeThinking ? "You may think first inside <think>...</think>; after it, your response" : "Your response";
  return `${thinking} must be in the format of:\n${WM_FORMAT}\nThe order is required: perception, reasoning, prediction, then the answer last.`;
}

/** The rules block shared by main's world-model prompts, for the given objects. */
export function wmRules(objectsSentence: string, maxActions: number, actionSep: string): string {
  return `Rules for <perception> and <prediction>:
- You must strictly describe the relative position of ${objectsSentence} **relative to the player**.
- For each object, you MUST include:
  - exactly ONE vertical relationship: \`above\`, \`below\`, or \`same row\`
  - exactly ONE horizontal relationship: \`left\`, \`right\`, or \`same column\`
- Use ONLY the terms: \`above\`, \`below\`, \`same row\`, \`left\`, \`right\`, \`same column\`.
- Always use the phrasing pattern:
  "X is <vertical> and <horizontal> of the player".
- Do NOT use the word \`same\` alone.
- Do not include any extra information.

Rules for <answer>:
- Output 1 to ${maxActions} action(s).
- Valid actions are: Up, Down, Left, Right.
- Separate multiple actions with \`${actionSep}\`.`;
}

/** `no_think`: only the answer tag. */
export function noThinkPrompt(maxActions: number, actionSep: string, example: string, addExample: boolean): string {
  return paperFormatPrompt(
    { description: "You should provide only your answer.", format: "<answer>...</answer>", example },
    maxActions,
    actionSep,
    addExample,
  );
}

/** `eval_mode`: lenient; only the first answer tag counts, thinking is optional. */
export function evalModePrompt(maxActions: number, actionSep: string, example: string, addExample: boolean): string {
  return paperFormatPrompt(
    {
      description: "You may reason first (optional), but you must give your answer inside <answer>...</answer>.",
      format: "<answer>...</answer>",
      example,
    },
    maxActions,
    actionSep,
    addExample,
  );
}
