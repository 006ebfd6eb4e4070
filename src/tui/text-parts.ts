/**
 * Splits an agent's reply into the parts the episode viewer sets apart: reasoning
 * (`<think>`, `<reasoning>`), world-model fields (`<perception>`/`<observation>`,
 * `<prediction>`), the answer (`<answer>`, or Navigation's `<action>`) and plain text
 * around them. A reply whose `<think>` was opened by the chat template starts with the
 * reasoning and a bare `</think>`; that prefix counts as thinking too.
 */

export type TextPartKind = "think" | "perception" | "prediction" | "answer" | "plain";

export interface TextPart {
  kind: TextPartKind;
  text: string;
}

const TAG_KINDS: Record<string, TextPartKind> = {
  think: "think",
  thought: "think",
  reasoning: "think",
  perception: "perception",
  observation: "perception",
  prediction: "prediction",
  answer: "answer",
  action: "answer",
};

const TAGGED = /<(think|thought|reasoning|perception|observation|prediction|answer|action)>([\s\S]*?)<\/\1>/g;

export function splitReply(reply: string): TextPart[] {
  const parts: TextPart[] = [];
  const push = (kind: TextPartKind, text: string) => {
    const trimmed = text.trim();
    if (trimmed !== "") parts.push({ kind, text: trimmed });
  };
  let rest = reply;
  const bareClose = rest.indexOf("</think>");
  if (bareClose >= 0 && !rest.slice(0, bareClose).includes("<think>")) {
    push("think", rest.slice(0, bareClose));
    rest = rest.slice(bareClose + "</think>".length);
  }
  let last = 0;
  for (const match of rest.matchAll(TAGGED)) {
    push("plain", rest.slice(last, match.index));
    push(TAG_KINDS[match[1]!]!, match[2]!);
    last = match.index! + match[0].length;
  }
  push("plain", rest.slice(last));
  return parts;
}
