/**
 * The InternVL family end to end through the family seam alone: `vagen train` (two PPO
 * steps on the one-turn DigitEnv: rollouts on the engine over the actor's weights,
 * token-level conversations in InternVL's chat format, the training forward, an update),
 * `vagen export` of a step (config, tokenizer, chat_template.jinja, preprocessor and
 * processor configs beside the weights under InternVLForConditionalGeneration's names,
 * which transformers 5.18 loads with vagen's logits (test/training/h200/check_export.py, by
 * hand; docs/models.md has the figure); it loads back as InternVL), and `vagen sft` on the
 * FrozenLake solver's text episodes (the loss falls; `final/` loads as InternVL).
 */
import { afterAll, describe, expect, test } from "bun:test";
import { existsSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { loadModelFamily } from "../../src/models/index.ts";
import { InternVLChatModel } from "../../src/models/internvl/chat-model.ts";
import { internVLCheckpointName } from "../../src/models/internvl/weights.ts";
import { runSft } from "../../src/sft/trainer.ts";
import * as torch from "../../src/torch/index.ts";
import { safetensors } from "../../src/torch/index.ts";
import { loadTrainConfig } from "../../src/training/config.ts";
import { exportCheckpoint } from "../../src/training/export.ts";
import { runTraining } from "../../src/training/trainer.ts";

const INTERNVL_DIR = join(import.meta.dir, "..", "fixtures", "internvl_tiny");
const DIGIT = join(import.meta.dir, "..", "training", "digit.yaml");

const root = mkdtempSync(join(tmpdir(), "vagen-internvl-pipeline-"));
afterAll(() => rmSync(root, { recursive: true, force: true }));

describe("InternVL through train, export and sft", () => {
  test(
    "two RL steps train the InternVL weights, and a step exports as an InternVL model directory",
    async () => {
      const dir = join(root, "train");
      await runTraining(
        // PPO with a critic: its advantages are never all zero, as GRPO's are when every
        // group's rewards happen to be equal, so the weights move whatever was sampled
        await loadTrainConfig(DIGIT, [`model.model_dir=${INTERNVL_DIR}`, `trainer.output_dir=${dir}`, "trainer.total_steps=2", "data.max_response_length=4", "algorithm.adv_estimator=default_gae"]),
      );
      const out = join(dir, "exported");
      exportCheckpoint(join(dir, "checkpoints", "step_2"), out);
      for (const f of ["config.json", "generation_config.json", "tokenizer.json", "chat_template.jinja", "preprocessor_config.json", "processor_config.json", "model.safetensors"]) {
        expect(existsSync(join(out, f))).toBe(true);
      }
      expect(JSON.parse(readFileSync(join(out, "config.json"), "utf8")).model_type).toBe("internvl");

      const stored = safetensors.load(join(out, "model.safetensors"));
      const exported = loadModelFamily(out, { device: "cpu", dtype: "f32" });
      const base = loadModelFamily(INTERNVL_DIR, { device: "cpu", dtype: "f32" });
      try {
        expect(exported).toBeInstanceOf(InternVLChatModel);
        expect(stored.has("lm_head.weight")).toBe(true);
        expect([...stored.keys()].some((k) => k.startsWith("value_head."))).toBe(false);
        // Under InternVLForConditionalGeneration's own module names.
        expect([...stored.keys()].sort()).toEqual([...base.weights.keys()].map(internVLCheckpointName).sort());
        expect(stored.has("model.language_model.layers.0.self_attn.q_proj.weight")).toBe(true);
        expect(stored.has("model.vision_tower.encoder.layer.0.lambda_1")).toBe(true);
        expect(stored.has("model.multi_modal_projector.linear_1.weight")).toBe(true);
        const changed = (name: string) => torch.tidy(() => base.weights.get(name)!.sub(exported.weights.get(name)!).abs().max().item());
        expect(changed("model.embed_tokens.weight")).toBeGreaterThan(0);
        expect(changed("model.layers.0.self_attn.k_norm.weight")).toBeGreaterThan(0);
        // Text-only rollouts: the vision tower gets no gradient and stays as it was.
        expect(changed("vision_tower.encoder.layer.0.attention.q_proj.weight")).toBe(0);
      } finally {
        for (const t of stored.values()) t.dispose();
        exported.dispose();
        base.dispose();
      }
    },
    { timeout: 300_000 },
  );

  test(
    "sft on the FrozenLake solver's text episodes lowers the loss, and final/ loads as InternVL",
    async () => {
      const losses: number[] = [];
      const result = await runSft(
        {
          model_dir: INTERNVL_DIR,
          output_dir: join(root, "sft"),
          seed: 0,
          device: "cpu",
          dtype: "f32",
          data: {
            layout: "no_concat",
            solver: {
              env: "FrozenLake",
              config: { render_mode: "text", desc: ["SFH", "HFF", "HHG"], prompt_format: "no_think", max_actions_per_step: 1, use_example_in_sys_prompt: false },
              episodes: 2,
              seed_start: 0,
              max_turns: 6,
              random_action_prob: 0,
              random_moves: "any",
              actions_per_turn: 1,
              careless_episode_prob: 0,
              state_noise_prob: 0,
            },
            eval_dirs: [],
            only_success: true,
          },
          optim: { lr: 1e-2, weight_decay: 0, grad_clip: 1.0, warmup_steps: 0, schedule: "constant" },
          train: { epochs: 3, batch_size: 8, micro_batch_size: 8, max_steps: 0, save_every_epoch: false, freeze_vision_tower: false, label_smoothing: 0, stop_below_loss: 0 },
        },
        (event) => {
          if (event.type === "step") losses.push(event.loss);
        },
      );
      expect(losses.length).toBe(3);
      expect(losses.at(-1)!).toBeLessThan(0.8 * losses[0]!);
      const final = loadModelFamily(result.modelDir, { device: "cpu", dtype: "f32" });
      try {
        expect(final.family).toBe("internvl");
      } finally {
        final.dispose();
      }
    },
    { timeout: 300_000 },
  );
});
