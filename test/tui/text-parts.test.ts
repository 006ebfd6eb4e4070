import { expect, test } from "bun:test";
import { splitReply } from "../../src/tui/text-parts.ts";

test("think and answer are set apart, text around them kept", () => {
  expect(splitReply("Sure. <think>box is left</think> <answer>Left, Up</answer> done")).toEqual([
    { kind: "plain", text: "Sure." },
    { kind: "think", text: "box is left" },
    { kind: "answer", text: "Left, Up" },
    { kind: "plain", text: "done" },
  ]);
});

test("world-model sections in main's order", () => {
  const parts = splitReply("<perception>P</perception><reasoning>R</reasoning><prediction>S</prediction><answer>A</answer>");
  expect(parts.map((p) => p.kind)).toEqual(["perception", "think", "prediction", "answer"]);
});

test("a think opened by the chat template: the text before a bare </think> is thinking", () => {
  expect(splitReply("the goal is up</think><answer>Up</answer>")).toEqual([
    { kind: "think", text: "the goal is up" },
    { kind: "answer", text: "Up" },
  ]);
});

test("no tags: one plain part; empty reply: none", () => {
  expect(splitReply("agagag")).toEqual([{ kind: "plain", text: "agagag" }]);
  expect(splitReply("  ")).toEqual([]);
});
