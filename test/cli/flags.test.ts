/** The shared parser for numeric command-line flags (src/cli/flags.ts). */
import { expect, test } from "bun:test";
import { integerFlag, numberFlag } from "../../src/cli/flags.ts";

const message = (f: () => unknown) => {
  try {
    f();
  } catch (err) {
    return (err as Error).message;
  }
  return "no error";
};

test("integers with bounds", () => {
  const maxTokens = integerFlag("max-tokens", { min: 1 });
  expect(maxTokens("16")).toBe(16);
  expect(message(() => maxTokens("0"))).toBe('--max-tokens: got "0", expected an integer >= 1');
  expect(message(() => maxTokens("2.5"))).toBe('--max-tokens: got "2.5", expected an integer >= 1');
  expect(message(() => maxTokens(""))).toBe('--max-tokens: got "", expected an integer >= 1');
  expect(integerFlag("seed")("-3")).toBe(-3);
});

test("numbers with an open lower bound", () => {
  const topP = numberFlag("top-p", { above: 0, max: 1 });
  expect(topP("1")).toBe(1);
  expect(topP("0.25")).toBe(0.25);
  expect(message(() => topP("0"))).toBe('--top-p: got "0", expected a number > 0 and <= 1');
  expect(message(() => topP("nan"))).toBe('--top-p: got "nan", expected a number > 0 and <= 1');
});
