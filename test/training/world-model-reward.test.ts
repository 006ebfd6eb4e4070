/**
 * World-model rewards in a training step (VAGEN-Full): with `state_reward` on a spec, the
 * env is built without the key, every turn is scored by the env's exact parser, the
 * episode means land in metrics.jsonl as train/<tag>/..., and each section's score sits
 * in the dumped rows' token_rewards on the last token of its section. The tiny fixture
 * cannot write the wm format, so the engine's generation is scripted: every reply is one
 * correct description of the fixed board, as token ids of the fixture's tokenizer.
 */
import { afterEach, describe, expect, spyOn, test } from "bun:test";
import { mkdtempSync, readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Engine } from "../../src/engine/engine.ts";
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
