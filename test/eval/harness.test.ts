import { describe, expect, test } from "bun:test";
import { join } from "node:path";
import type { ChatMessage } from "../../src/core/chat.ts";
import type { Completion, InferenceClient, SamplingParams } from "../../src/clients/types.ts";
import { messageText } from "../../src/core/chat.ts";
import { VagenError } from "../../src/core/errors.ts";
import { compactHarness } from "../../src/harness/compact.ts";
import { concatHarness } from "../../src/harness/concat.ts";
import { noConcatHarness } from "../../src/harness/no-concat.ts";
import { observationToMessage } from "../../src/harness/observation.ts";
import { createHarness, listHarnesses } from "../../src/harness/registry.ts";
import { LineEnv, type LineEnvOptions, solidImage } from "./fixtures/line-env.ts";

/** A client that replays scripted answers and records what it was sent. */
class ScriptedClient implements InferenceClient {
  readonly description = "scripted";
  readonly prompts: ChatMessage[][] = [];
  readonly samplings: SamplingParams[] = [];
  constructor(private readonly answers: (string | Error)[]) {}
  async create(messages: ChatMessage[], sampling: SamplingParams): Promise<Completion> {
    this.prompts.push(messages);
    this.samplings.push(sampling);
    const a = this.answers[Math.min(this.prompts.length - 1, this.answers.length - 1)]!;
    if (a instanceof Error) throw a;
    return { text: a, finishReason: "stop", usage: { promptTokens: 1, completionTokens: 1 }, tokenIds: [1, 2], logprobs: [-0.1, -0.2] };
  }
}

function run(harness = concatHarness(), answers: (string | Error)[] = ["<answer>right</answer>"], env: LineEnvOptions = {}, seed = 2, maxTurns = 5) {
  const client = new ScriptedClient(answers);
  const lineEnv = new LineEnv(env);
  return { client, env: lineEnv, result: harness.runEpisode({ env: lineEnv, client, seed, maxTurns, sampling: { maxTokens: 64 } }) };
}

describe("observation to message", () => {
  test("images go where their placeholders are", () => {
    const a = solidImage(2, 2, 1);
    const b = solidImage(2, 2, 2);
    const msg = observationToMessage("user", { text: "A<image>B<image>", images: [a, b] });
    expect(msg.content).toEqual([{ type: "text", text: "A" }, { type: "image", image: a }, { type: "text", text: "B" }, { type: "image", image: b }]);
  });

  test("a placeholder/image count mismatch is an error naming both counts", () => {
    expect(() => observationToMessage("user", { text: "no placeholder", images: [solidImage(1, 1, 0)] })).toThrow(
      '0 "<image>" placeholder(s) but 1 image(s)',
    );
    expect(() => observationToMessage("user", { text: "<img>", images: [] }, "<img>")).toThrow(VagenError);
  });
});

describe("concat", () => {
  test("one growing conversation; the turn records keep prompt, tokens, reward, info", async () => {
    // goal = seed % 5 + 1 = 3 cells; one step per turn.
    const { client, result } = run(concatHarness(), ["<answer>right</answer>"], {}, 2);
    const ep = await result;
    expect(ep.finishReason).toBe("done");
    expect(ep.turns.length).toBe(3);
    expect(ep.rowPerTurn).toBe(false);
    expect(client.prompts.map((p) => p.length)).toEqual([2, 4, 6]);
    expect(client.prompts[2]!.map((m) => m.role)).toEqual(["system", "user", "assistant", "user", "assistant", "user"]);
    expect(messageText(client.prompts[2]![5]!)).toBe("moved 1: at 2, goal 3");
    expect(client.samplings[0]).toEqual({ maxTokens: 64 });
    const last = ep.turns[2]!;
    expect(last.prompt).toBe(client.prompts[2]!);
    expect(last.completion.tokenIds).toEqual([1, 2]);
    expect(last.completion.logprobs).toEqual([-0.1, -0.2]);
    expect(last.info.success).toBe(true);
    expect(ep.totalReward).toBeCloseTo(0.1 * 3 + 1);
  });

  test("stops on reported success even without done", async () => {
    const ep = await run(concatHarness(), ["<answer>right,right</answer>"], { successWithoutDone: true }, 1).result;
    expect(ep.finishReason).toBe("success");
    expect(ep.turns.length).toBe(1);
  });

  test("stops at max_turns", async () => {
    const ep = await run(concatHarness(), ["nonsense"], {}, 4, 3).result;
    expect(ep.finishReason).toBe("max_turns");
    expect(ep.turns.length).toBe(3);
    expect(ep.totalReward).toBe(0);
  });
});

describe("no_concat", () => {
  test("system + current observation only; one row per turn; success without done does not stop it", async () => {
    const { client, result } = run(noConcatHarness(), ["<answer>right,right</answer>"], { successWithoutDone: true }, 1, 3);
    const ep = await result;
    expect(ep.rowPerTurn).toBe(true);
    expect(ep.finishReason).toBe("max_turns");
    expect(client.prompts.map((p) => p.map((m) => m.role))).toEqual([["system", "user"], ["system", "user"], ["system", "user"]]);
    expect(messageText(client.prompts[1]![1]!)).toBe("moved 2: at 2, goal 2");
  });
});

describe("compact", () => {
  test("a text history of earlier actions and rewards, no old images, then the current observation", async () => {
    const { client, result } = run(compactHarness({ history_turns: 2 }), ["<answer>right</answer>", "bad", "<answer>right</answer>", "<answer>right</answer>"], { vision: true }, 3);
    const ep = await result;
    expect(ep.finishReason).toBe("done");
    expect(ep.turns.length).toBe(5);
    const fourth = client.prompts[3]!;
    expect(fourth.length).toBe(2);
    const user = fourth[1]!;
    expect(user.content.filter((p) => p.type === "image").length).toBe(1);
    const text = messageText(user);
    expect(text).toContain("Earlier turns (1 older turn(s) not shown):");
    expect(text).toContain("Turn 2: no valid action; the answer was not in the required format; reward 0.");
    expect(text).toContain("Turn 3: actions [right]; reward 0.10.");
    expect(text).not.toContain("Turn 1:");
    expect(text).toContain("Current observation:\nmoved 1: at 2, goal 4");
  });

  test("rejects unknown options with the key named", () => {
    expect(() => compactHarness({ history_turn: 2 })).toThrow('unknown key "history_turn"');
  });
});

describe("failures are recorded, not thrown", () => {
  test("a client that keeps failing ends the episode with model_error", async () => {
    const ep = await run(concatHarness(), ["<answer>right</answer>", new Error("HTTP 500 after 7 attempts")], {}, 3).result;
    expect(ep.finishReason).toBe("model_error");
    expect(ep.turns.length).toBe(1);
    expect(ep.error).toEqual({ kind: "model_error", message: "HTTP 500 after 7 attempts" });
  });

  test("an env that throws ends the episode with env_error and an 'Environment Error' observation", async () => {
    const ep = await run(concatHarness(), ["<answer>right</answer>"], { throwOnTurn: 2 }, 4).result;
    expect(ep.finishReason).toBe("env_error");
    expect(ep.turns.length).toBe(2);
    expect(ep.turns[1]!.observation.text).toBe("Environment Error");
    expect(ep.error?.message).toBe("simulator crashed");
  });

  test("an observation whose images don't match its placeholders is an env_error", async () => {
    const ep = await run(concatHarness(), ["<answer>right</answer>"], { vision: true, badObservationOnTurn: 1 }, 4).result;
    expect(ep.finishReason).toBe("env_error");
    expect(ep.error?.message).toContain("placeholder");
  });

  test("an abort propagates instead of being recorded", async () => {
    const controller = new AbortController();
    controller.abort();
    const env = new LineEnv();
    const client = new ScriptedClient(["<answer>right</answer>"]);
    const pending = concatHarness().runEpisode({ env, client, seed: 1, maxTurns: 3, sampling: {}, signal: controller.signal });
    await expect(pending).rejects.toMatchObject({ name: "AbortError" });
  });
});

describe("registry and import paths", () => {
  const fixture = join(import.meta.dir, "fixtures", "custom-harness.ts");

  test("lists the built-in harnesses; unknown names suggest the closest", async () => {
    expect(listHarnesses()).toEqual(expect.arrayContaining(["concat", "no_concat", "compact"]));
    await expect(createHarness("no-concat")).rejects.toThrow('did you mean "no_concat"');
    await expect(createHarness("concat", { window: 3 })).rejects.toThrow("takes no options");
  });

  test("loads a harness object and a factory from a file, relative to a base dir", async () => {
    const latest = await createHarness("./fixtures/custom-harness.ts:LatestOnly", {}, import.meta.dir);
    expect(latest.name).toBe("latest_only");
    const client = new ScriptedClient(["<answer>right</answer>"]);
    await latest.runEpisode({ env: new LineEnv(), client, seed: 0, maxTurns: 2, sampling: {} });
    expect(client.prompts[0]!.map((m) => m.role)).toEqual(["user"]);

    const prefixed = await createHarness(`${fixture}:withPrefix`, { prefix: "HINT: " });
    const client2 = new ScriptedClient(["<answer>right</answer>"]);
    await prefixed.runEpisode({ env: new LineEnv(), client: client2, seed: 0, maxTurns: 1, sampling: {} });
    expect(messageText(client2.prompts[0]![1]!).startsWith("HINT: start")).toBe(true);
  });

  test("a missing export or a non-harness export is a clear error", async () => {
    await expect(createHarness(`${fixture}:LatestOnyl`)).rejects.toThrow('has no export "LatestOnyl" (did you mean "LatestOnly"?)');
    await expect(createHarness(`${fixture}:notAHarness`)).rejects.toThrow("expected a harness");
    await expect(createHarness("./nowhere.ts:X", {}, import.meta.dir)).rejects.toThrow("harness file not found");
  });
});
