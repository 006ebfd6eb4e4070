/**
 * World-model rewards in a training step (VAGEN-Full) and in eval: with `state_reward` on a spec, the
 * env is built without the key, every turn is scored by the env's exact parser, the
 * episode means land in metrics.jsonl as train/<tag>/..., and each section's score sits
 * in the dumped rows' token_rewards on the last token of its section. The tiny fixture
 * cannot write the wm format, so the engine's generation is scripted: every reply is one
 * correct description of the fixed board, as token ids of the fixture's tokenizer.
 */
import { afterEach, describe, expect, spyOn, test } from "bun:test";
import { existsSync, mkdtempSync, readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createEnv } from "../../envs/registry.ts";
import type { Env } from "../../envs/_common/types.ts";
import type { InferenceClient } from "../../src/clients/types.ts";
import { messageText } from "../../src/core/chat.ts";
import { validate } from "../../src/config/index.ts";
import { Engine } from "../../src/engine/engine.ts";
import { EvalConfig } from "../../src/evaluation/config.ts";
import { buildEvalPlan } from "../../src/evaluation/plan.ts";
import { runEvaluation } from "../../src/evaluation/runner.ts";
import type { GenerateRequest, GenerationResult } from "../../src/engine/types.ts";
import { TextTokenizer } from "../../src/models/tokenizer.ts";
import { loadTrainConfig } from "../../src/training/config.ts";
import { runTraining } from "../../src/training/trainer.ts";

const CONFIG = join(import.meta.dir, "world-model.yaml");
const FIXTURE = join(import.meta.dir, "../fixtures/qwen2_5_vl_tiny");

// On "SFFG" the goal is on the player's row, to the right, before and after one step right.
const REPLY =
  "<perception>The goal is same row and right of the player</perception>" +
  "<reasoning>go right</reasoning>" +
  "<prediction>The goal will be same row and right of the player</prediction>" +
  "<answer>Right</answer>";

describe("world-model rewards in vagen train", () => {
  let restore: (() => void) | undefined;
  afterEach(() => restore?.());

  test(
    "state_estimation_reward in metrics.jsonl and each section's score on its last token",
    async () => {
      const tokenizer = TextTokenizer.fromDir(FIXTURE);
      const replyIds = tokenizer.encode(REPLY);
      const imEnd = tokenizer.tokenId("<|im_end|>");
      const generate = spyOn(Engine.prototype, "generate").mockImplementation(
        async (request: GenerateRequest): Promise<GenerationResult> => ({
          tokenIds: [...replyIds, imEnd],
          logprobs: new Array(replyIds.length + 1).fill(-1),
          text: REPLY,
          finishReason: "stop",
          stoppedBy: imEnd,
          promptTokens: request.prompt.tokenIds.length,
          cachedPromptTokens: 0,
        }),
      );
      restore = () => generate.mockRestore();

      const dir = mkdtempSync(join(tmpdir(), "vagen-wm-"));
      await runTraining(await loadTrainConfig(CONFIG, [`trainer.output_dir=${dir}`]));
      expect(generate).toHaveBeenCalledTimes(2);

      const [step] = readFileSync(join(dir, "metrics.jsonl"), "utf8").trim().split("\n").map((l) => JSON.parse(l) as Record<string, number>);
      expect(step!["train/lake/state_estimation_reward"]).toBeCloseTo(0.5, 6);
      expect(step!["train/lake/transition_prediction_reward"]).toBeCloseTo(0.25, 6);
      expect(step!["train/lake/format_correct_rate"]).toBe(1);

      // Where each section's content ends, as a token index: token k covers [end(k-1), end(k)).
      const ends: number[] = [];
      for (const id of replyIds) ends.push((ends.at(-1) ?? 0) + tokenizer.decode([id]).length);
      const lastTokenOf = (closingTag: string) => ends.findIndex((end) => end >= REPLY.indexOf(closingTag));
      const perception = lastTokenOf("</perception>");
      const prediction = lastTokenOf("</prediction>");
      expect(prediction).toBeGreaterThan(perception);

      const rows = readFileSync(join(dir, "batches", "step_1.jsonl"), "utf8").trim().split("\n").slice(1).map((l) => JSON.parse(l));
      expect(rows.length).toBe(2);
      for (const row of rows) {
        const first = (row.response_mask as number[]).indexOf(1);
        expect(row.response_ids.slice(first, first + replyIds.length + 1)).toEqual([...replyIds, imEnd]);
        const rewards = row.token_rewards as number[];
        expect(rewards[first + perception]).toBeCloseTo(0.5, 6);
        expect(rewards[first + prediction]).toBeCloseTo(0.25, 6);
        // The env's own reward (FrozenLake's format reward, 0.02) stays on the reply's last token; nothing else is paid.
        const last = first + replyIds.length;
        expect(rewards[last]).toBeCloseTo(0.02, 6);
        const rest = rewards.filter((_, j) => j !== first + perception && j !== first + prediction && j !== last);
        expect(rest.every((x) => x === 0)).toBe(true);
      }
    },
    { timeout: 30_000 },
  );

  test("a setup the reward cannot run with is refused by the config check, naming the key", async () => {
    const dir = mkdtempSync(join(tmpdir(), "vagen-wm-bad-"));
    await expect(loadTrainConfig(CONFIG, [`trainer.output_dir=${dir}`, "data.train.lake.config.prompt_format=free_think"])).rejects.toThrow(
      /world-model\.yaml: key "data\.train\.lake\.config\.state_reward": world-model rewards need prompt_format wm/,
    );
    await expect(loadTrainConfig(CONFIG, [`trainer.output_dir=${dir}`, "data.train.lake.config.state_reward.scorer=judge"])).rejects.toThrow(
      /key "data\.train\.lake\.config\.state_reward": judge_base_url and judge_model must be set/,
    );
    await expect(loadTrainConfig(CONFIG, [`trainer.output_dir=${dir}`, "data.train.lake.config.state_reward.scorrer=exact"])).rejects.toThrow(
      /unknown key "data\.train\.lake\.config\.state_reward\.scorrer" \(did you mean "scorer"\?\)/,
    );
  });
});

describe("world-model rewards in vagen eval", () => {
  test("each episode's scores in its metrics.json and their means in summary.json", async () => {
    const dir = mkdtempSync(join(tmpdir(), "vagen-wm-eval-"));
    const config = validate(EvalConfig, {
      output_dir: dir,
      model: { backend: "openai", base_url: "http://127.0.0.1:9/v1", model: "scripted" },
      envs: {
        lake: {
          name: "FrozenLake",
          config: {
            desc: ["SFFG"],
            prompt_format: "wm",
            state_reward: { state_estimation: { enable: true, reward: 0.5 }, transition_prediction: { enable: true, reward: 0.25 }, scorer: "exact" },
          },
          episodes: 2,
          max_turns: 2,
        },
      },
    });
    const plan = buildEvalPlan(config);
    expect(plan.envs[0]!.config.state_reward).toBeUndefined(); // the env never sees the key
    // Two steps right on SFFG: the goal is on the player's row, to the right, before and after each.
    const client: InferenceClient = {
      description: "scripted",
      create: async () => ({ text: REPLY, finishReason: "stop", usage: { promptTokens: 0, completionTokens: 0 } }),
    };
    await runEvaluation(plan, { client, createEnv: (name, envConfig) => createEnv(name, envConfig) });

    const summary = JSON.parse(readFileSync(join(dir, "summary.json"), "utf8"));
    // per_turn: each of the two turns pays the full section reward, summed over the episode
    expect(summary.envs.lake.state_reward).toEqual({ state_estimation_reward: 1, transition_prediction_reward: 0.5, format_correct_rate: 1 });
    const episode = join(dir, "lake", `seed_${plan.episodes[0]!.seed}`, "metrics.json");
    expect(existsSync(episode)).toBe(true);
    expect(JSON.parse(readFileSync(episode, "utf8")).state_reward.state_estimation_reward).toBe(1);
  });
});

describe("the system prompt with the reward on", () => {
  test("an env whose prompt lacks the wm tags gets main's format, examples and axes appended", async () => {
    const dir = mkdtempSync(join(tmpdir(), "vagen-wm-prompt-"));
    const config = validate(EvalConfig, {
      output_dir: dir,
      model: { backend: "openai", base_url: "http://127.0.0.1:9/v1", model: "scripted" },
      envs: { lake: { name: "FrozenLake", config: { desc: ["SFFG"], prompt_format: "wm", state_reward: { state_estimation: { enable: true, reward: 0.5 }, scorer: "exact" } }, episodes: 1, max_turns: 1 } },
    });
    const systemPrompts: string[] = [];
    const client: InferenceClient = {
      description: "scripted",
      create: async (messages) => {
        systemPrompts.push(messageText(messages[0]!));
        return { text: REPLY, finishReason: "stop", usage: { promptTokens: 0, completionTokens: 0 } };
      },
    };
    // FrozenLake with a terse prompt of its own, as a custom env might have.
    const terse = async (name: string, envConfig: Record<string, unknown>): Promise<Env> => {
      const env = await createEnv(name, envConfig);
      return { stateRewardSpec: env.stateRewardSpec, reset: (seed) => env.reset(seed), step: (r) => env.step(r), close: () => env.close(), systemPrompt: async () => ({ text: "Reach the goal.", images: [] }) };
    };
    await runEvaluation(buildEvalPlan(config), { client, createEnv: terse });
    expect(systemPrompts[0]!.startsWith("Reach the goal.\nUse the complete response format below; the order is required:\n")).toBe(true);
    expect(systemPrompts[0]).toContain("<perception>");
    const summary = JSON.parse(readFileSync(join(dir, "summary.json"), "utf8"));
    expect(summary.envs.lake.state_reward.state_estimation_reward).toBe(0.5);
  });
});
