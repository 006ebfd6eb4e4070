/**
 * The GLM-4V family end to end through the family seam alone: `vagen train` (two PPO
 * steps on the one-turn DigitEnv: rollouts on the engine over the actor's weights,
 * token-level conversations in GLM's chat format, the training forward, an update),
 * `vagen export` of a step (config, tokenizer, chat_template.jinja and preprocessor
 * config beside the weights under transformers' names, the fused gate_up_proj as it
 * was; transformers 5.18 loads it, checked by hand with test/training/h200/check_export.py,
 * see docs/models.md; it loads back as GLM-4V). `vagen sft` refuses GLM's chat format
 * (no end-of-turn token after a reply), by name.
 */
import { afterAll, describe, expect, test } from "bun:test";
import { existsSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { loadModelFamily } from "../../src/models/index.ts";
import { Glm4vChatModel } from "../../src/models/glm4v/chat-model.ts";
import { glm4vCheckpointName } from "../../src/models/glm4v/weights.ts";
import { runSft } from "../../src/sft/trainer.ts";
import * as torch from "../../src/torch/index.ts";
import { safetensors } from "../../src/torch/index.ts";
import { loadTrainConfig } from "../../src/training/config.ts";
import { exportCheckpoint } from "../../src/training/export.ts";
import { runTraining } from "../../src/training/trainer.ts";

const GLM_DIR = join(import.meta.dir, "..", "fixtures", "glm4v_tiny");
const DIGIT = join(import.meta.dir, "..", "training", "digit.yaml");

const root = mkdtempSync(join(tmpdir(), "vagen-glm4v-pipeline-"));
afterAll(() => rmSync(root, { recursive: true, force: true }));

describe("GLM-4V through train, export and sft", () => {
  test(
    "two RL steps train the GLM-4V weights, and a step exports as a GLM-4V model directory",
    async () => {
      const dir = join(root, "train");
      await runTraining(
        // PPO with a critic: its advantages are never all zero, as GRPO's are when every
        // group's rewards happen to be equal, so the weights move whatever was sampled
        await loadTrainConfig(DIGIT, [`model.model_dir=${GLM_DIR}`, `trainer.output_dir=${dir}`, "trainer.total_steps=2", "data.max_response_length=4", "algorithm.adv_estimator=default_gae"]),
      );
      const out = join(dir, "exported");
      exportCheckpoint(join(dir, "checkpoints", "step_2"), out);
      for (const f of ["config.json", "generation_config.json", "tokenizer.json", "chat_template.jinja", "preprocessor_config.json", "model.safetensors"]) {
        expect(existsSync(join(out, f))).toBe(true);
      }
      expect(JSON.parse(readFileSync(join(out, "config.json"), "utf8")).model_type).toBe("glm4v");

      const stored = safetensors.load(join(out, "model.safetensors"));
      const exported = loadModelFamily(out, { device: "cpu", dtype: "f32" });
      const base = loadModelFamily(GLM_DIR, { device: "cpu", dtype: "f32" });
      try {
        expect(exported).toBeInstanceOf(Glm4vChatModel);
        expect(stored.has("lm_head.weight")).toBe(true);
        expect([...stored.keys()].some((k) => k.startsWith("value_head."))).toBe(false);
        // Under transformers' names for Glm4vForConditionalGeneration.
        expect([...stored.keys()].sort()).toEqual([...base.weights.keys()].map(glm4vCheckpointName).sort());
        expect(stored.has("model.language_model.layers.0.self_attn.q_proj.weight")).toBe(true);
        expect(stored.has("model.visual.patch_embed.proj.weight")).toBe(true);
        const changed = (name: string) => torch.tidy(() => base.weights.get(name)!.sub(exported.weights.get(name)!).abs().max().item());
        expect(changed("model.embed_tokens.weight")).toBeGreaterThan(0);
        expect(stored.has("model.language_model.layers.1.mlp.gate_up_proj.weight")).toBe(true);
        expect(changed("model.layers.1.mlp.gate_up_proj.weight")).toBeGreaterThan(0);
        expect(changed("model.layers.0.post_mlp_layernorm.weight")).toBeGreaterThan(0);
        // Text-only rollouts: the vision tower gets no gradient and stays as it was.
        expect(changed("visual.blocks.0.attn.qkv.weight")).toBe(0);
      } finally {
        for (const t of stored.values()) t.dispose();
        exported.dispose();
        base.dispose();
      }
    },
    { timeout: 300_000 },
  );

  test(
    "sft refuses GLM's chat format by name: the template writes no end-of-turn token after a reply",
    async () => {
      // GLM ends a turn where the model writes the next role header (<|user|>, a stop id),
      // while a supervised sample's reply must end with a token the template writes after
      // it (conversation.ts endOfTurnId). Until the codec can name that id, sft refuses.
      const run = runSft(
        {
          model_dir: GLM_DIR,
          output_dir: join(root, "sft"),
          seed: 0,
          device: "cpu",
          dtype: "f32",
          data: {
            layout: "no_concat",
            solver: {
              env: "FrozenLake",
              config: { render_mode: "text", desc: ["SFH", "HFF", "HHG"], prompt_format: "no_think", max_actions_per_step: 1, use_example_in_sys_prompt: false },
              episodes: 1,
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
          train: { epochs: 1, batch_size: 8, micro_batch_size: 8, max_steps: 0, save_every_epoch: false, freeze_vision_tower: false, label_smoothing: 0, stop_below_loss: 0 },
        },
        () => {},
      );
      await expect(run).rejects.toThrow(/glm4v_tiny\/chat_template\.jinja: the chat template writes nothing after an assistant reply/);
    },
    { timeout: 300_000 },
  );
});
