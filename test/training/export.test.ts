/**
 * vagen export: a checkpoint's actor becomes a model directory that loads like the base
 * model and carries the trained weights.
 */
import { describe, expect, test } from "bun:test";
import { existsSync, mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import * as torch from "../../src/torch/index.ts";
import { safetensors } from "../../src/torch/index.ts";
import { loadModelFamily } from "../../src/models/index.ts";
import { loadTrainConfig } from "../../src/training/config.ts";
import { exportCheckpoint } from "../../src/training/export.ts";
import { runTraining } from "../../src/training/trainer.ts";

const CONFIG = join(import.meta.dir, "digit.yaml");

describe("vagen export", () => {
  test(
    "a step's actor loads as a model directory with the trained weights and no value head",
    async () => {
      const dir = mkdtempSync(join(tmpdir(), "vagen-export-"));
      // An entropy bonus moves the actor whatever the step's rewards: a step whose episodes
      // all score 0 (the tiny policy's samples differ with the checkout's path) has zero
      // advantages, and the actor would rightly not move.
      await runTraining(await loadTrainConfig(CONFIG, [`trainer.output_dir=${dir}`, "trainer.total_steps=1", "algorithm.adv_estimator=default_gae", "actor.entropy_coeff=0.01"]));
      const out = join(dir, "exported");
      const result = exportCheckpoint(join(dir, "checkpoints", "step_1"), out);
      for (const f of ["config.json", "model.safetensors", "tokenizer.json", "chat_template.jinja", "preprocessor_config.json"]) expect(existsSync(join(out, f))).toBe(true);
      const stored = safetensors.load(join(dir, "checkpoints", "step_1", "actor", "model.safetensors"));
      const family = loadModelFamily(out, { device: "cpu", dtype: "f32" });
      const weights = family.weights;
      expect(result.tensors).toBe(stored.size);
      expect([...weights.keys()].some((k) => k.startsWith("value_head."))).toBe(false);
      for (const name of ["lm_head.weight", "model.layers.1.self_attn.q_proj.weight", "visual.merger.mlp.2.weight"]) {
        expect(torch.tidy(() => weights.get(name)!.sub(stored.get(name)!).abs().max().item())).toBe(0);
      }
      // trained: the policy moved away from the base model
      const base = loadModelFamily(join(import.meta.dir, "../fixtures/qwen2_5_vl_tiny"), { device: "cpu", dtype: "f32" });
      expect(torch.tidy(() => base.weights.get("lm_head.weight")!.sub(weights.get("lm_head.weight")!).abs().max().item())).toBeGreaterThan(0);
      for (const t of stored.values()) t.dispose();
      family.dispose();
      base.dispose();
    },
    { timeout: 300_000 },
  );
});
