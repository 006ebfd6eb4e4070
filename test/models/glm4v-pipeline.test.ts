/**
 * The GLM-4V family end to end through the family seam alone: `vagen train` (two PPO
 * steps on the one-turn DigitEnv: rollouts on the engine over the actor's weights,
 * token-level conversations in GLM's chat format, the training forward, an update),
 * `vagen export` of a step (config, tokenizer, chat_template.jinja and preprocessor
 * config beside the weights under transformers' names, the fused gate_up_proj as it
 * was; transformers 5.18 loads it, checked by hand with test/training/h200/check_export.py,
 * see docs/models.md; it loads back as GLM-4V). Token-level conversations in GLM's format,
 * where the template writes nothing after a reply and the model stops by sampling the next
 * `<|user|>`, equal the template's rendering; `vagen sft` trains on them.
 */
import { afterAll, describe, expect, test } from "bun:test";
import { existsSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Conversation } from "../../src/models/conversation.ts";
import { LoraAdapter, attachAdapter, loadModelFamily, loraTargets, type ModelFamily } from "../../src/models/index.ts";
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
    "LoRA all-linear adapts the fused gate_up_proj as one module: base + adapter equals the merged weights; gate_proj alone is refused by name",
    () => {
      const family = loadModelFamily(GLM_DIR, { device: "cpu", dtype: "f32" });
      const merged = loadModelFamily(GLM_DIR, { device: "cpu", dtype: "f32" });
      try {
        const adapter = LoraAdapter.create(family.weights, family.spec.numLayers, { rank: 4, alpha: 8, targets: loraTargets("all-linear"), seed: 3 }, { device: "cpu", dtype: "f32" });
        expect(adapter.settings.targets).toEqual(["q_proj", "k_proj", "v_proj", "o_proj", "down_proj", "gate_up_proj"]);
        expect([...adapter.weights.keys()]).toContain("base_model.model.model.layers.0.mlp.gate_up_proj.lora_B.weight");
        // B away from zero, so the adapter changes the output
        let seed = 0;
        for (const [name, t] of adapter.weights) if (name.endsWith("lora_B.weight")) t.copy_(torch.randn(t.shape, { dtype: "f32", generator: new torch.Generator({ seed: seed++ }) }).mul(0.05));
        attachAdapter(family.weights, adapter);
        for (const [name, t] of adapter.merged(family.weights)) {
          merged.weights.get(name)!.copy_(t);
          t.dispose();
        }
        const ids = [[5, 17, 42, 8, 99, 3]];
        const logits = (f: ModelFamily) => torch.noGrad(() => torch.tidy(() => f.logits(f.forwardForTraining({ inputIds: ids, images: [[]] })).toFloat32Array()));
        const got = logits(family);
        const want = logits(merged);
        const scale = Math.max(...want.map(Math.abs));
        expect(Math.max(...got.map((v, i) => Math.abs(v - want[i]!))) / scale).toBeLessThan(1e-5);
        const plain = adapter.without(() => logits(family));
        expect(Math.max(...plain.map((v, i) => Math.abs(v - want[i]!))) / scale).toBeGreaterThan(1e-3);
        attachAdapter(family.weights, undefined);
        adapter.dispose();
        expect(() => LoraAdapter.create(family.weights, family.spec.numLayers, { rank: 4, alpha: 8, targets: ["gate_proj"], seed: 0 }, { device: "cpu", dtype: "f32" })).toThrow(/got gate_proj without up_proj, but this model stores the two as one mlp\.gate_up_proj/);
      } finally {
        family.dispose();
        merged.dispose();
      }
      const qwen = loadModelFamily(join(import.meta.dir, "..", "fixtures", "qwen3_tiny"), { device: "cpu", dtype: "f32" });
      try {
        expect(() => LoraAdapter.create(qwen.weights, qwen.spec.numLayers, { rank: 4, alpha: 8, targets: ["gate_up_proj"], seed: 0 }, { device: "cpu", dtype: "f32" })).toThrow(/got gate_up_proj, but this model stores gate_proj and up_proj apart/);
      } finally {
        qwen.dispose();
      }
    },
    { timeout: 60_000 },
  );

  test(
    "a multi-turn conversation whose replies stop on <|user|> holds the template's tokens, with each stop id once and sampled",
    () => {
      const family = loadModelFamily(GLM_DIR, { device: "cpu", dtype: "f32" });
      try {
        const codec = family.conversationCodec();
        const conversation = new Conversation(codec);
        const text = (t: string) => [{ type: "text" as const, text: t }];
        conversation.addMessage({ role: "user", content: text("Where is the goal?") });
        conversation.beginReply();
        const stop = conversation.endOfTurnId();
        expect(stop).toBe(family.tokenizer.tokenId("<|user|>"));
        const reply = family.tokenizer.encode("Right");
        conversation.addReply({ tokenIds: [...reply, stop] });
        conversation.addMessage({ role: "user", content: text("And now?") });
        const prompt = conversation.beginReply();
        const rendered = (family as Glm4vChatModel).buildPrompt([
          { role: "user", content: text("Where is the goal?") },
          { role: "assistant", content: text("Right") },
          { role: "user", content: text("And now?") },
        ]);
        expect(prompt.tokenIds).toEqual(rendered.tokenIds);
        // the stop id is the reply's last sampled token, so imitation learns to stop
        const record = conversation.record();
        const span = record.replySpans[0]!;
        expect(record.tokenIds[span.end - 1]).toBe(stop);
        expect(record.lossMask.slice(span.start, span.end).every((m) => m === 1)).toBe(true);
        expect(record.tokenIds.filter((id) => id === stop).length).toBe(2);
      } finally {
        family.dispose();
      }
    },
    { timeout: 60_000 },
  );

  test(
    "sft on the FrozenLake solver's text episodes lowers the loss, and final/ loads as GLM-4V",
    async () => {
      const losses: number[] = [];
      const result = await runSft(
        {
          model_dir: GLM_DIR,
          output_dir: join(root, "sft"),
          seed: 0,
          device: "cpu",
          dtype: "f32",
          data: {
            layout: "concat",
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
      expect(final).toBeInstanceOf(Glm4vChatModel);
      final.dispose();
    },
    { timeout: 300_000 },
  );
});
